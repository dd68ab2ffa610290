"""GuardedLangGraphStore: a batch (``batch``, ``abatch``) with a put the sidecar refuses
beside new items, over a real LangGraph InMemoryStore and a real sidecar with the
bundled policies: whatever the sidecar recorded, the store holds, and nothing else."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore
from memlineage.client import InvalidArgument, MemLineageClient, NotFound, PolicyDenied
from memlineage.integrations.langgraph_store import GuardedLangGraphStore, memory_id

BOUND = 20.0  # seconds any batch of these tests may take at most

_users = itertools.count()


@pytest.fixture
def ns() -> tuple[str, str]:
    return (f"refusal-{next(_users)}", "notes")


def value(text: str, creator: str, **lineage: Any) -> dict[str, Any]:
    return {"text": text, "_lineage": {"creator": creator, **lineage}}


def held(inner: InMemoryStore, ml: MemLineageClient, ns: tuple[str, str], key: str) -> Any:
    """(the store's text, the record's creator), None for either that is absent."""
    item = inner.get(ns, key)
    try:
        creator = ml.explain(memory_id(ns, key)).memory.creator.id
    except NotFound:
        creator = None
    return (item.value["text"] if item else None, creator)


def run(store: GuardedLangGraphStore, ops: list[Op], how: str) -> Any:
    if how == "batch":
        return store.batch(ops)
    return asyncio.run(asyncio.wait_for(store.abatch(ops), BOUND))


@pytest.mark.parametrize("how", ["batch", "abatch"])
def test_a_put_refused_after_a_record_still_writes_the_recorded_item(
    ml: MemLineageClient, ns: tuple[str, str], how: str
) -> None:
    """New items a, b and c, b naming a dependency the sidecar has no record of. Before,
    a was recorded, b refused, and nothing written: the sidecar named agent:a's value of
    an item the store never held. Now what was recorded is written, then b's refusal is
    raised; c, after it, is neither."""
    inner = InMemoryStore()
    store = GuardedLangGraphStore(inner, ml)
    ops: list[Op] = [
        PutOp(ns, "a", value("by-a", "agent:a")),
        PutOp(ns, "b", value("by-b", "agent:b", dependencies=["nowhere"])),
        PutOp(ns, "c", value("by-c", "agent:c")),
    ]
    with pytest.raises(InvalidArgument, match="nowhere"):
        run(store, ops, how)
    assert held(inner, ml, ns, "a") == ("by-a", "agent:a")
    assert held(inner, ml, ns, "b") == (None, None)
    assert held(inner, ml, ns, "c") == (None, None)


@pytest.mark.parametrize("how", ["batch", "abatch"])
def test_an_update_denied_in_a_batch_records_none_of_its_new_items(
    ml: MemLineageClient, ns: tuple[str, str], how: str
) -> None:
    """A tool's put over what the user stated is denied: the batch's new item is not
    recorded either (updates and deletes are decided before any Record), and the user's
    item keeps its value and record."""
    inner = InMemoryStore()
    store = GuardedLangGraphStore(inner, ml)
    store.put(ns, "home", value("Paris", "user:alice"))
    ops: list[Op] = [
        PutOp(ns, "new", value("by-agent", "agent:a")),
        PutOp(ns, "home", value("Lyon", "tool:web")),
    ]
    with pytest.raises(PolicyDenied):
        run(store, ops, how)
    assert held(inner, ml, ns, "new") == (None, None)
    assert held(inner, ml, ns, "home") == ("Paris", "user:alice")


def test_concurrent_abatches_of_every_kind_leave_store_and_sidecar_agreeing(
    ml: MemLineageClient, ns: tuple[str, str]
) -> None:
    """Four abatches at once, each with puts (new items, updates, the same keys as the
    others), deletes, gets, searches and namespace listings: afterwards each item the
    store holds is under a record naming its writer, and none fails."""
    inner = InMemoryStore()
    store = GuardedLangGraphStore(inner, ml)
    keys = [f"k{i}" for i in range(12)]
    for key in keys[:6]:
        store.put(ns, key, value("zero", "agent:zero"))

    def ops(b: int) -> list[Op]:
        out: list[Op] = []
        for j, key in enumerate(keys):
            if (j + b) % 5 == 0:
                out.append(PutOp(ns, key, None))
            else:
                out.append(PutOp(ns, key, value(f"w{b}", f"agent:w{b}")))
            out += [GetOp(ns, key), SearchOp(ns, limit=4)]
        out.append(ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0))
        return out

    async def all_at_once() -> list[Any]:
        batches = (store.abatch(ops(b)) for b in range(4))
        return await asyncio.wait_for(asyncio.gather(*batches, return_exceptions=True), BOUND)

    answers = asyncio.run(all_at_once())
    assert [a for a in answers if isinstance(a, BaseException)] == []
    writers = {"zero": "agent:zero", **{f"w{b}": f"agent:w{b}" for b in range(4)}}
    for key in keys:
        text, creator = held(inner, ml, ns, key)
        if text is not None:
            assert creator == writers[text], key

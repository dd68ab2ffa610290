"""GuardedLangGraphStore: an ``aput`` of a new item cancelled while its Record is being
answered (the sidecar has applied it), with a real LangGraph InMemoryStore and a real
sidecar; the real client is held once the Record is applied, so the cancellation lands
exactly there. Afterwards the store and the sidecar agree: the value whose record
exists is in the store. Also LangGraph's own concurrency (a superstep's parallel
branches, sync and async) ends with every item's record naming its writer."""

from __future__ import annotations

import asyncio
import itertools
import operator
import threading
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from memlineage.client import AsyncMemLineageClient, MemLineageClient, NotFound
from memlineage.integrations.langgraph_store import GuardedLangGraphStore, memory_id
from support.sidecar import RunningSidecar

BOUND = 20.0  # seconds any wait of these tests may take at most

_users = itertools.count()


@pytest.fixture
def ns() -> tuple[str, str]:
    return (f"cancel-{next(_users)}", "notes")


class _HeldSync(MemLineageClient):
    """The real client; a Record, once the sidecar applied it, sets ``inside`` and
    waits for ``release`` before answering."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inside, self.release = threading.Event(), threading.Event()

    def record(self, *args: Any, **kwargs: Any) -> Any:
        answer = super().record(*args, **kwargs)
        self.inside.set()
        assert self.release.wait(BOUND)
        return answer


class _HeldAsync(AsyncMemLineageClient):
    """`_HeldSync` for the async client."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inside, self.release = threading.Event(), threading.Event()

    async def record(self, *args: Any, **kwargs: Any) -> Any:
        answer = await super().record(*args, **kwargs)
        self.inside.set()
        assert await asyncio.to_thread(self.release.wait, BOUND)
        return answer


@pytest.mark.parametrize("client_kind", ["sync", "async"])
def test_an_aput_cancelled_during_its_record_still_writes_the_recorded_value(
    sidecar: RunningSidecar, ml: MemLineageClient, ns: tuple[str, str], client_kind: str
) -> None:
    """Before, the cancellation abandoned the put between its Record and its store
    write: the sidecar held agent:new's record of a value the store never held (and
    the next put of the key was an update of it, asked of its creator). Now a Record
    sent is followed by its write, then the cancellation is raised."""

    async def scenario() -> None:
        client: _HeldSync | _HeldAsync = (
            _HeldSync(sidecar.address, timeout=10)
            if client_kind == "sync"
            else _HeldAsync(sidecar.address, timeout=10)
        )
        inner = InMemoryStore()
        store = GuardedLangGraphStore(inner, client)
        value = {"text": "new", "_lineage": {"creator": "agent:new"}}
        try:
            task = asyncio.create_task(store.aput(ns, "note", value))
            assert await asyncio.to_thread(client.inside.wait, BOUND)
            task.cancel()
            await asyncio.sleep(0)  # the cancellation is delivered while the Record waits
            client.release.set()
            await asyncio.wait({task}, timeout=BOUND)
            assert task.cancelled()
        finally:
            client.release.set()
            if isinstance(client, _HeldAsync):
                await client.close()
            else:
                client.close()
        item = inner.get(ns, "note")
        assert item is not None and item.value == {"text": "new"}
        assert ml.explain(memory_id(ns, "note")).memory.creator.id == "agent:new"

    asyncio.run(scenario())


class _State(TypedDict):
    seen: Annotated[list[int], operator.add]


def _graph(ns: tuple[str, str], branches: int, key_of: Any, is_async: bool) -> StateGraph:
    """One superstep of ``branches`` nodes, each putting its key, then searching."""
    graph = StateGraph(_State)

    def node(i: int) -> Any:
        value = {"text": f"by-{i}", "_lineage": {"creator": f"agent:n{i}"}}

        def run(state: _State, *, store: BaseStore) -> dict[str, list[int]]:
            store.put(ns, key_of(i), value)
            return {"seen": [len(store.search(ns, limit=50))]}

        async def arun(state: _State, *, store: BaseStore) -> dict[str, list[int]]:
            await store.aput(ns, key_of(i), value)
            return {"seen": [len(await store.asearch(ns, limit=50))]}

        return arun if is_async else run

    for i in range(branches):
        graph.add_node(f"n{i}", node(i))
        graph.add_edge(START, f"n{i}")
        graph.add_edge(f"n{i}", END)
    return graph


@pytest.mark.parametrize("invoke", ["invoke", "ainvoke"])
@pytest.mark.parametrize("keys", ["own", "shared"])
def test_parallel_branches_leave_each_item_under_its_writers_record(
    sidecar: RunningSidecar, ml: MemLineageClient, ns: tuple[str, str], invoke: str, keys: str
) -> None:
    """Eight branches of one superstep put (their own key, or all the same one) and
    search through one wrapper: every item the store holds has a record naming the
    branch whose text it holds, and the shared key's record has one version per put."""
    branches = 8

    def key_of(i: int) -> str:
        return f"k{i}" if keys == "own" else "shared"

    async def run() -> None:
        async with AsyncMemLineageClient(sidecar.address, timeout=10) as client:
            store = GuardedLangGraphStore(inner, client)
            compiled = _graph(ns, branches, key_of, is_async=True).compile(store=store)
            await asyncio.wait_for(compiled.ainvoke({"seen": []}), BOUND)

    inner = InMemoryStore()
    if invoke == "invoke":
        store = GuardedLangGraphStore(inner, ml)
        _graph(ns, branches, key_of, is_async=False).compile(store=store).invoke({"seen": []})
    else:
        asyncio.run(run())
    for key in sorted({key_of(i) for i in range(branches)}):
        item = inner.get(ns, key)
        assert item is not None
        record = ml.explain(memory_id(ns, key))
        assert record.memory.creator.id == "agent:n" + item.value["text"].removeprefix("by-")
        if keys == "shared":
            assert len(record.versions) == branches - 1  # earlier versions; newest is memory
    with pytest.raises(NotFound):
        ml.explain(memory_id(ns, "never"))

"""GuardedLangGraphStore's rollback over real LangGraph stores (InMemoryStore with an
index, SqliteStore with TTLs) and a real sidecar: an update the sidecar refuses
after the store applied it puts the old item back as it was put, its ``index``
setting and TTL with it, and leaves no vector of the refused value."""

from __future__ import annotations

import asyncio
import itertools
import re
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from memlineage.client import MemLineageClient, Unavailable
from memlineage.integrations.langgraph_restore import PutSettings, Settings, fingerprint
from memlineage.integrations.langgraph_store import GuardedLangGraphStore, memory_id
from support.faults import LosesRevise
from support.sidecar import RunningSidecar


@pytest.fixture
def client(sidecar: RunningSidecar) -> Iterator[LosesRevise]:
    """The real client, whose Revise fails once `lose` is set: the refusal that comes
    after the store applied an update."""
    with LosesRevise(sidecar.address, timeout=10) as c:
        yield c


_users = itertools.count()


@pytest.fixture
def ns() -> tuple[str, str]:
    return (f"rb-{next(_users)}", "notes")


def _vector(text: str) -> list[float]:
    v = [0.0] * 32
    for word in re.findall(r"\w+", text.lower()):
        v[zlib.crc32(word.encode()) % 32] += 1.0
    return v


INDEX: Any = {"dims": 32, "embed": lambda ts: [_vector(t) for t in ts], "fields": ["text"]}
OLD = {"text": "alpha bravo charlie", "note": "delta echo"}
NEW = {"text": "zulu yankee xray", "note": "whiskey victor"}
TTL: Any = {"default_ttl": 30}


def _refused(store: GuardedLangGraphStore, ns: tuple[str, str], mode: str, **put: Any) -> None:
    """An update of ``ns/item`` to NEW that the sidecar refuses after the write."""
    value = {**NEW, "_lineage": {"creator": f"user:{ns[0]}"}}
    with pytest.raises(Unavailable):
        if mode == "sync":
            store.put(ns, "item", value, **put)
        else:
            asyncio.run(store.aput(ns, "item", value, **put))


def _scores(inner: BaseStore, ns: tuple[str, str], query: str) -> dict[str, float | None]:
    """The wrapped store's own similarity of each item to ``query`` (None: no vector)."""
    return {i.key: i.score for i in inner.search(ns, query=query, limit=10)}


def _put_old(store: GuardedLangGraphStore, ns: tuple[str, str], **put: Any) -> None:
    store.put(ns, "item", {**OLD, "_lineage": {"creator": f"user:{ns[0]}"}}, **put)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_item_put_unindexed_comes_back_unindexed(
    client: LosesRevise, ns: tuple[str, str], mode: str
) -> None:
    """Before: put back as ``PutOp(ns, key, value)``, the store's default index, so an
    item put with ``index=False`` came back found by vector search; and the refused
    value's vectors stayed (InMemoryStore drops them only on a delete)."""
    inner = InMemoryStore(index=INDEX)
    store = GuardedLangGraphStore(inner, client)
    _put_old(store, ns, index=False)
    assert _scores(inner, ns, "alpha bravo charlie") == {"item": None}
    client.lose = True
    _refused(store, ns, mode)
    assert inner.get(ns, "item").value == OLD
    assert _scores(inner, ns, "alpha bravo charlie") == {"item": None}
    assert _scores(inner, ns, "zulu yankee xray") == {"item": None}  # no vector of NEW


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_item_indexed_on_its_own_fields_comes_back_so(
    client: LosesRevise, ns: tuple[str, str], mode: str
) -> None:
    """An item put with ``index=["note"]`` is found by its note, not by its text, as
    before the refused update (before: its text embedded, the store's default)."""
    inner = InMemoryStore(index=INDEX)
    store = GuardedLangGraphStore(inner, client)
    _put_old(store, ns, index=["note"])
    client.lose = True
    _refused(store, ns, mode)
    assert inner.get(ns, "item").value == OLD
    assert _scores(inner, ns, "delta echo")["item"] == pytest.approx(1.0)
    assert _scores(inner, ns, "alpha bravo charlie")["item"] != pytest.approx(1.0)
    assert _scores(inner, ns, "whiskey victor")["item"] != pytest.approx(1.0)


def _ttl_minutes(inner: SqliteStore, ns: tuple[str, str]) -> Any:
    row = inner.conn.execute(
        "select ttl_minutes from store where prefix = ? and key = ?", (".".join(ns), "item")
    ).fetchone()
    return row[0]


def test_an_item_put_with_a_ttl_comes_back_with_it(
    client: LosesRevise, ns: tuple[str, str]
) -> None:
    """Before: put back with no TTL at all, so an item meant to expire never did."""
    with SqliteStore.from_conn_string(":memory:", ttl=TTL) as inner:
        inner.setup()
        store = GuardedLangGraphStore(inner, client)
        _put_old(store, ns, ttl=5)
        assert _ttl_minutes(inner, ns) == 5
        client.lose = True
        _refused(store, ns, "sync", ttl=60)
        assert inner.get(ns, "item").value == OLD
        assert _ttl_minutes(inner, ns) == 5
        other = GuardedLangGraphStore(inner, client)  # a wrapper that knows no settings
        _refused(other, ns, "sync", ttl=60)
        assert _ttl_minutes(inner, ns) == 30  # the safe side: the store's default, not 60


def test_an_item_whose_settings_the_wrapper_does_not_know_comes_back_on_the_safe_side(
    client: LosesRevise, ns: tuple[str, str]
) -> None:
    """Written by another wrapper (or around this one): no store answers an item's
    index setting or TTL, so it comes back unindexed (never found by a vector it may
    not have had), with a TTL no longer than the refused put's nor the store's
    default (before: indexed by default, and no TTL at all)."""
    inner = InMemoryStore(index=INDEX)
    _put_old(GuardedLangGraphStore(inner, client), ns, index=False)
    client.lose = True
    _refused(GuardedLangGraphStore(inner, client), ns, "sync")
    assert inner.get(ns, "item").value == OLD
    assert _scores(inner, ns, "alpha bravo charlie") == {"item": None}
    client.lose = False
    with SqliteStore.from_conn_string(":memory:", ttl=TTL) as sqlite:
        sqlite.setup()
        _put_old(GuardedLangGraphStore(sqlite, client), ns, ttl=None)
        client.lose = True
        _refused(GuardedLangGraphStore(sqlite, client), ns, "sync", ttl=10)
        assert sqlite.get(ns, "item").value == OLD
        assert _ttl_minutes(sqlite, ns) == 10  # the refused put's, shorter than the default


def test_put_settings_follow_the_value_the_store_holds() -> None:
    """The settings are an item's while the store holds the value they were put with
    (a value as a store answers it has the same fingerprint); a delete forgets them,
    and the least recently put go first past `keep`."""
    kept = PutSettings(keep=2)
    kept.applied("a", PutOp(("n",), "a", {"x": 1.5, "y": [1, "z"]}, index=False, ttl=5.0))
    assert kept.of("a", {"y": [1, "z"], "x": 1.5}) == Settings(False, 5.0)
    assert kept.of("a", {"x": 2}) is None  # another value: written since by someone else
    assert fingerprint({"b": 1, "a": 2}) == fingerprint({"a": 2, "b": 1})
    kept.applied("a", PutOp(("n",), "a", None))
    assert kept.of("a", {"x": 1.5, "y": [1, "z"]}) is None
    for key in ("a", "b", "c"):
        kept.applied(key, PutOp(("n",), key, {"k": key}, index=["k"]))
    assert kept.of("a", {"k": "a"}) is None and kept.of("c", {"k": "c"}) == Settings(["k"], None)


class _ClosedBeforeRevise(MemLineageClient):
    """The real client, closed (by another thread of the application) between an
    update's decision and its Revise once `lose` is set: the client raises its
    RuntimeError ("the client is closed"), no `MemLineageError`."""

    lose = False

    def revise(self, *args: Any, **kwargs: Any) -> Any:
        if self.lose:
            self.close()
        return super().revise(*args, **kwargs)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_update_whose_record_fails_with_any_error_puts_the_old_item_back(
    sidecar: RunningSidecar, ns: tuple[str, str], mode: str
) -> None:
    """Before: only a `MemLineageError` or `PolicyDenied` put the old item back; any
    other error (a client closed meanwhile) left the new value in the store under the
    old record, its creator credited with what it may not have written."""
    inner = InMemoryStore(index=INDEX)
    with MemLineageClient(sidecar.address, timeout=10) as ml:
        closing = _ClosedBeforeRevise(sidecar.address, timeout=10)
        store = GuardedLangGraphStore(inner, closing)
        _put_old(store, ns)
        closing.lose = True
        value = {**NEW, "_lineage": {"creator": f"user:{ns[0]}"}}
        with pytest.raises(RuntimeError, match="the client is closed"):
            if mode == "sync":
                store.put(ns, "item", value)
            else:
                asyncio.run(store.aput(ns, "item", value))
        assert inner.get(ns, "item").value == OLD
        record = ml.explain(memory_id(ns, "item")).memory
        assert (record.creator.id, record.version) == (f"user:{ns[0]}", 1)

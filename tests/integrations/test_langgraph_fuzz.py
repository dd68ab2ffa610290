"""`GuardedLangGraphStore` takes what an agent's graph hands it: any namespace, key,
value (its `_lineage` too), filter and page, through a real sidecar. Each operation
either does what LangGraph's store would or is refused as the adapter documents
(ValueError naming the part, PolicyDenied with the decision), never another
exception from the adapter or the client: over InMemoryStore (sync and async), and
over SqliteStore beside a bare one, whose own errors it raises as they come."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from memlineage.client import AsyncMemLineageClient, MemLineageClient
from memlineage.integrations.langgraph_store import (
    DECISION_KEY,
    LINEAGE_KEY,
    GuardedLangGraphStore,
)
from support.differential import REFUSALS, agrees, outcome, refused
from support.json_values import json_like
from support.sidecar import RunningSidecar

DEFAULTS = {"creator": "agent:planner"}


@pytest.fixture(scope="module")
def store(sidecar: RunningSidecar) -> Iterator[GuardedLangGraphStore]:
    with MemLineageClient(sidecar.address, timeout=10) as client:
        yield GuardedLangGraphStore(InMemoryStore(), client, defaults=DEFAULTS)


@pytest.fixture(scope="module")
def inner() -> InMemoryStore:
    """The async twin's wrapped store (its guarded store is made per event loop)."""
    return InMemoryStore()


parts = st.sampled_from(
    ["user-1", "trip", "", "a/b", "a.b", "x" * 200, "é", "\x00", " "]
) | st.text(max_size=6)
namespaces = st.lists(parts, min_size=0, max_size=3).map(tuple)
json_values = json_like()
lineage = st.dictionaries(
    st.sampled_from(["creator", "confidence", "dependencies", "tags", "type", "claim", "x"]),
    json_values | st.sampled_from(["user:alice", "tool:web", [["user-1", "k"]], ["k"]]),
    max_size=3,
)
values = st.dictionaries(st.text(max_size=4), json_values, max_size=3) | st.builds(
    lambda v, lin: {**v, "_lineage": lin},
    st.dictionaries(st.text(max_size=4), json_values, max_size=2),
    lineage | json_values,
)


@dataclass(frozen=True)
class Args:
    """One example's arguments, for each operation."""

    ns: tuple[str, ...]
    key: str
    value: dict[str, Any]
    query: str | None
    search_filter: dict[str, Any] | None
    limit: int
    offset: int


arguments = st.builds(
    Args,
    ns=namespaces,
    key=st.sampled_from(["k", "", "k/2", "x" * 300]) | st.text(max_size=5),
    value=values,
    query=st.none() | st.text(max_size=5),
    search_filter=st.none() | st.dictionaries(st.text(max_size=3), json_values, max_size=2),
    limit=st.integers(-2, 12),
    offset=st.integers(-2, 5),
)


FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
"""Each test's settings but for its number of examples."""


def operations(store: GuardedLangGraphStore, a: Args, prefix: str = "") -> list[Any]:
    """put, get, search, list_namespaces, delete of `a` (`prefix` "a": their async twins)."""

    def op(name: str) -> Any:
        return getattr(store, prefix + name)

    return [
        lambda: op("put")(a.ns, a.key, a.value),
        lambda: op("get")(a.ns, a.key),
        lambda: op("search")(
            a.ns, query=a.query, filter=a.search_filter, limit=a.limit, offset=a.offset
        ),
        lambda: op("list_namespaces")(prefix=a.ns or None, limit=max(a.limit, 1)),
        lambda: op("delete")(a.ns, a.key),
    ]


def tally(outcome: str) -> None:
    OUTCOMES[outcome] += 1


@settings(FUZZ, max_examples=300)
@given(a=arguments)
def test_any_operation_is_done_or_refused_as_documented(
    store: GuardedLangGraphStore, a: Args
) -> None:
    for call in operations(store, a):
        try:
            call()
            tally("done")
        except REFUSALS as exc:
            tally(type(exc).__name__)


OUTCOMES: Counter[str] = Counter()


@settings(FUZZ, max_examples=100)
@given(a=arguments)
def test_the_async_path_does_the_same_or_refuses_as_documented(
    sidecar: RunningSidecar, inner: InMemoryStore, a: Args
) -> None:
    """The same operations through `abatch` (aput, aget, asearch, alist_namespaces,
    adelete) with an `AsyncMemLineageClient`: the same documented refusals only."""

    async def run() -> None:
        async with AsyncMemLineageClient(sidecar.address, timeout=10) as client:
            store = GuardedLangGraphStore(inner, client, defaults=DEFAULTS)
            for call in operations(store, a, "a"):
                try:
                    await call()
                    tally("async done")
                except REFUSALS as exc:
                    tally(type(exc).__name__)

    asyncio.run(run())


def _stored(value: dict[str, Any]) -> dict[str, Any]:
    """A value as the guarded store keeps it: the reserved keys are never stored (a
    degraded read's decision is added to what it returns)."""
    return {k: v for k, v in value.items() if k not in (LINEAGE_KEY, DECISION_KEY)}


@settings(FUZZ, max_examples=60)
@given(a=arguments)
def test_over_sqlite_it_does_what_the_bare_store_does_or_refuses(
    sidecar: RunningSidecar, a: Args
) -> None:
    """LangGraph's SqliteStore raises errors of its own (an integer past 64 bits in a
    value: TypeError): wrapped, each operation ends as it does on a bare SqliteStore
    fed the same, or is refused as documented; once nothing was refused, a get
    returns the bare store's value but for the reserved keys."""
    with (
        MemLineageClient(sidecar.address, timeout=10) as client,
        SqliteStore.from_conn_string(":memory:") as bare,
        SqliteStore.from_conn_string(":memory:") as inner,
    ):
        bare.setup()
        inner.setup()
        guarded = GuardedLangGraphStore(inner, client, defaults=DEFAULTS)
        any_refused = False
        for plain, wrapped in zip(operations(bare, a), operations(guarded, a), strict=True):
            b, g = outcome(plain), outcome(wrapped)
            any_refused = any_refused or refused(g)
            assert agrees(b, g), (a, b, g)
            tally("sqlite " + g[0])
            if not any_refused and g[0] == "ok" and hasattr(g[1], "value"):  # a get's item
                assert _stored(g[1].value) == _stored(b[1].value), (a, b, g)


def test_the_fuzz_reaches_the_sidecar() -> None:
    """Run after the fuzz (file order): some operations were done, not all refused."""
    assert OUTCOMES["done"] > 100 and OUTCOMES["async done"] > 30, OUTCOMES
    assert OUTCOMES["sqlite ok"] > 20, OUTCOMES

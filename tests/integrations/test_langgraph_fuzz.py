"""`GuardedLangGraphStore` takes what an agent's graph hands it: any namespace, key,
value (its `_lineage` too), filter and page, through a real sidecar. Each operation
either does what LangGraph's store would or is refused as the adapter documents
(ValueError naming the part, PolicyDenied with the decision), never another
exception from the adapter or the client."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore
from memlineage.client import MemLineageClient, PolicyDenied
from memlineage.integrations.langgraph_store import GuardedLangGraphStore
from support.json_values import json_like
from support.sidecar import RunningSidecar

REFUSALS = (ValueError, PolicyDenied)


@pytest.fixture(scope="module")
def store() -> Iterator[GuardedLangGraphStore]:
    with RunningSidecar() as s, MemLineageClient(s.address, timeout=10) as client:
        yield GuardedLangGraphStore(InMemoryStore(), client, defaults={"creator": "agent:planner"})


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


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ns=namespaces,
    key=st.sampled_from(["k", "", "k/2", "x" * 300]) | st.text(max_size=5),
    value=values,
    query=st.none() | st.text(max_size=5),
    search_filter=st.none() | st.dictionaries(st.text(max_size=3), json_values, max_size=2),
    limit=st.integers(-2, 12),
    offset=st.integers(-2, 5),
)
def test_any_operation_is_done_or_refused_as_documented(
    store: GuardedLangGraphStore,
    ns: tuple[str, ...],
    key: str,
    value: dict[str, Any],
    query: str | None,
    search_filter: dict[str, Any] | None,
    limit: int,
    offset: int,
) -> None:
    calls: list[Any] = [
        lambda: store.put(ns, key, value),
        lambda: store.get(ns, key),
        lambda: store.search(ns, query=query, filter=search_filter, limit=limit, offset=offset),
        lambda: store.list_namespaces(prefix=ns or None, limit=max(limit, 1)),
        lambda: store.delete(ns, key),
    ]
    for call in calls:
        try:
            call()
            OUTCOMES["done"] += 1
        except REFUSALS as exc:
            OUTCOMES[type(exc).__name__] += 1


OUTCOMES: Counter[str] = Counter()


def test_the_fuzz_reaches_the_sidecar() -> None:
    """Run after the fuzz (file order): some operations were done, not all refused."""
    assert OUTCOMES["done"] > 100, OUTCOMES

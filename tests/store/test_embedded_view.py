"""The embedded store walks its own rows for `lineage_view`: the same records, in the
same order, with the same missing ids and truncation as the walk every backend shares
(`traversal.lineage_view` over `_load`), on random DAGs, with status histories."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from memlineage.store import traversal
from memlineage.store.embedded import EmbeddedStore
from support.memories import NOW, memory

NS = "view"


@st.composite
def graphs(draw: st.DrawFn) -> tuple[EmbeddedStore, list[str]]:
    """Up to 25 memories, each on up to 3 earlier ones; some revoked (history)."""
    store = EmbeddedStore()
    n = draw(st.integers(1, 25))
    for i in range(n):
        deps = draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        store.record(memory(f"m{i}", *(f"m{d}" for d in deps), ns=NS), now=NOW)
    for i in draw(st.lists(st.integers(0, n - 1), max_size=3, unique=True)):
        store.revoke(NS, f"m{i}", reason="test", now=NOW + 1)
    ids = [f"m{i}" for i in range(n)]
    return store, ids


@settings(max_examples=200, deadline=None)
@given(
    graph=graphs(),
    asked=st.lists(st.integers(0, 30), min_size=1, max_size=6),
    up=st.integers(0, 4),
    down=st.integers(0, 4),
    limit=st.integers(0, 12),
    history=st.booleans(),
)
def test_the_embedded_walk_is_the_shared_walk(
    graph: tuple[EmbeddedStore, list[str]],
    asked: list[int],
    up: int,
    down: int,
    limit: int,
    history: bool,
) -> None:
    store, _ = graph
    wanted = list(dict.fromkeys(f"m{i}" for i in asked))  # some past the last: missing
    got = store.lineage_view(
        NS, wanted, ancestor_depth=up, descendant_depth=down, limit=limit, with_history=history
    )
    shared = traversal.lineage_view(store._load, NS, wanted, up, down, limit, history)
    assert list(got.records.items()) == list(shared.records.items())
    assert all(got.records[k] is shared.records[k] for k in got.records)  # the cached objects
    assert (got.missing, got.truncated) == (shared.missing, shared.truncated)


def test_an_unknown_namespace_has_every_id_missing() -> None:
    view = EmbeddedStore().lineage_view("nobody", ["a", "b"], ancestor_depth=3)
    assert (view.records, view.missing, view.truncated) == ({}, ("a", "b"), False)

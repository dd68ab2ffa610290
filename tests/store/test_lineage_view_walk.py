"""`lineage_view` (the walk every backend shares, its neighbours gathered inline) gives
the records, order, missing ids and truncation of the plain breadth-first walk below,
on random DAGs with status histories, in the cached record objects the store hands out;
and for several wanted ids, untruncated, exactly the union of each one's own view (what
a Check of each would load), so a batch decides on no less lineage than a Check."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from support.memories import NOW, memory

NS = "view"


def plain_view(
    store: EmbeddedStore, wanted: list[str], up: int, down: int, limit: int, history: bool
) -> tuple[dict[str, MemoryRecord], tuple[str, ...], bool]:
    """Level by level: the neighbours of the last level not yet reached in that
    direction (its ancestors first, then its descendants), loading those not loaded
    yet, cut at `limit` records beyond `wanted`."""

    def fresh(level: list[MemoryRecord], ancestors: bool, seen: set[str]) -> list[str]:
        out: dict[str, None] = {}
        for rec in level:
            for n in rec.dependencies if ancestors else rec.derivations:
                if n not in seen:
                    out[str(n)] = None
        seen.update(out)
        return list(out)

    records = store._load(NS, wanted, history)
    missing = tuple(i for i in wanted if i not in records)
    ups = downs = list(records.values())
    seen_up, seen_down = set(records), set(records)
    added, truncated = 0, False
    for depth in range(1, max(up, down) + 1):
        new_up = fresh(ups, True, seen_up) if depth <= up else []
        new_down = fresh(downs, False, seen_down) if depth <= down else []
        if not new_up and not new_down:
            break
        batch = [i for i in dict.fromkeys(new_up + new_down) if i not in records]
        if added + len(batch) > limit:
            truncated, batch = True, batch[: limit - added]
        loaded = store._load(NS, batch, history)
        records.update(loaded)
        added += len(loaded)
        ups = [records[i] for i in new_up if i in records]
        downs = [records[i] for i in new_down if i in records]
        if truncated:
            break
    return records, missing, truncated


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
def test_the_view_is_the_plain_breadth_first_walk(
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
    records, missing, truncated = plain_view(store, wanted, up, down, limit, history)
    assert list(got.records.items()) == list(records.items())
    assert all(got.records[k] is records[k] for k in got.records)  # the cached objects
    assert (got.missing, got.truncated) == (missing, truncated)


def test_an_unknown_namespace_has_every_id_missing() -> None:
    view = EmbeddedStore().lineage_view("nobody", ["a", "b"], ancestor_depth=3)
    assert (view.records, view.missing, view.truncated) == ({}, ("a", "b"), False)


@settings(max_examples=200, deadline=None)
@given(
    graph=graphs(),
    asked=st.lists(st.integers(0, 24), min_size=2, max_size=6),
    up=st.integers(0, 4),
    down=st.integers(0, 4),
)
def test_a_batch_view_is_the_union_of_each_ones_own_view(
    graph: tuple[EmbeddedStore, list[str]], asked: list[int], up: int, down: int
) -> None:
    store, ids = graph
    wanted = [i for i in dict.fromkeys(f"m{i}" for i in asked) if i in ids]
    batch = store.lineage_view(NS, wanted, ancestor_depth=up, descendant_depth=down)
    own: set[str] = set()
    for w in wanted:
        own |= set(store.lineage_view(NS, [w], ancestor_depth=up, descendant_depth=down).records)
    assert not batch.truncated
    assert set(batch.records) == own

"""A batch (FilterRank) decides each memory as a Check of it alone would.

One store read loads the lineage of every candidate together (`store.traversal`: the
union of each one's own view). Deciding a candidate on that union is exact only when
nothing another candidate brought in touches its own view: a parent loaded for another
candidate would cap a chain's reliability, a record past this candidate's lineage depth
would show up in its walks. `divergent` finds the candidates where that can happen and
gives each its own view, to be decided on alone; the others share the batch's records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from memlineage.lineage.model import MemoryRecord


def own_view(
    records: Mapping[str, MemoryRecord], start: str, up: int, down: int
) -> dict[str, MemoryRecord]:
    """What a Check of `start` alone loads (`traversal.lineage_view` from it), taken from
    `records`, which hold it: its ancestors to depth `up`, its descendants to `down`."""
    view = {start: records[start]}
    for depth, ancestors in ((up, True), (down, False)):
        frontier = [records[start]]
        for _ in range(depth):
            nxt: list[MemoryRecord] = []
            for rec in frontier:
                for n in _ids(rec.dependencies if ancestors else rec.derivations):
                    found = records.get(n)
                    if found is not None and n not in view:
                        view[n] = found
                        nxt.append(found)
            if not nxt:
                break
            frontier = nxt
    return view


Heights = dict[str, tuple[MemoryRecord, int]]
"""Per memory id, for the record object it holds (a store that shares immutable
records): the height of its whole ancestry, known to be below the lineage depth it was
found with. Keyed by the id, not the object's: a changed record replaces its entry
instead of pinning every earlier version (`snapshot._FACTS`)."""
HEIGHTS_LIMIT = 100_000


def divergent(
    records: Mapping[str, MemoryRecord],
    candidates: Sequence[str],
    up: int,
    down: int,
    known: Heights | None = None,
) -> dict[str, dict[str, MemoryRecord]]:
    """The candidates whose decision on all of `records` could differ from a Check of
    each alone, with their own views: those whose view has a record with a loaded
    neighbour outside it (a dependency: it caps reliability and extends the ancestor
    walks; with `down`, a derivation: it extends the descendant walks).

    `known` (only for `records` loaded whole, no walk cut by a limit, from a store
    that shares record objects): heights found before, kept across batches. A
    candidate's ancestry found shorter than `up` was loaded whole, so its height is
    its ancestry's own; dependencies never change and a purge only lowers it, so it
    holds for the same record object in any later batch."""
    out: dict[str, dict[str, MemoryRecord]] = {}
    if len(candidates) < 2:
        return out
    heights: dict[str, int] = {}
    recall = known.get if known is not None else None
    for mid in candidates:
        rec = records.get(mid)
        if rec is None:
            continue
        # Walking up only, a view can be cut only `up` levels above its candidate: one
        # whose loaded ancestry is shorter has all of it in its view (the common case).
        if not down:
            if recall is not None:
                hit = recall(mid)
                if hit is not None and hit[0] is rec and hit[1] < up:
                    continue
            height = _height(records, mid, heights, up)
            if height < up:
                if known is not None:
                    if len(known) >= HEIGHTS_LIMIT:
                        known.clear()
                    known[mid] = (rec, height)
                continue
        view = own_view(records, mid, up, down)
        for rec in view.values():
            if any(n in records and n not in view for n in _ids(rec.dependencies)) or (
                down and any(n in records and n not in view for n in rec.derivations)
            ):
                out[mid] = view
                break
    return out


def _height(
    records: Mapping[str, MemoryRecord], start: str, heights: dict[str, int], cap: int
) -> int:
    """The longest chain of loaded dependencies above `start` (0: none loaded), counted
    up to `cap` (enough to know whether a view of depth `cap` is cut); memoised in
    `heights` across candidates. Iterative (a chain is as long as the store holds); a
    cycle, which only a damaged store holds, counts as `cap`."""
    hit = heights.get(start)
    if hit is not None:
        return hit
    on_path = {start}
    stack = [(start, iter(_ids(records[start].dependencies)), 0)]
    while stack:
        node, deps, best = stack[-1]
        for d in deps:
            h = heights.get(d)
            if h is None:
                if d not in records:
                    continue
                if d in on_path:
                    best = cap  # a cycle
                    continue
                stack[-1] = (node, deps, best)
                on_path.add(d)
                stack.append((d, iter(_ids(records[d].dependencies)), 0))
                break
            if h + 1 > best:
                best = h + 1
        else:
            heights[node] = best if best < cap else cap
            on_path.discard(node)
            stack.pop()
            if stack:
                parent, pdeps, pbest = stack[-1]
                if best + 1 > pbest:
                    stack[-1] = (parent, pdeps, best + 1)
    return heights[start]


def _ids(ids: tuple[object, ...]) -> tuple[str, ...]:
    """A stored record's dependencies: plain ids (validate_new resolved any MemoryRef)."""
    return cast(tuple[str, ...], ids)


__all__ = ["Heights", "divergent", "own_view"]

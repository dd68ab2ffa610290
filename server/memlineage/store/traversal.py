"""The lineage traversals every backend shares: ancestors/descendants walks and the
lineage view, written once on top of a backend's batch load.

Each BFS level is one ``load`` call, so a backend answers in ``depth + 1`` round
trips whatever the fan-out.  ``LineageStore`` validates the arguments and holds its
snapshot (the embedded store's lock) around these; they only walk.
"""

from __future__ import annotations

from collections.abc import Callable

from memlineage.lineage.errors import NotFoundError
from memlineage.lineage.model import LineageView, MemoryRecord, Walk

Load = Callable[[str, list[str], bool], dict[str, MemoryRecord]]
"""A backend's ``_load(namespace, ids, with_history)``: one round trip per call."""


def walk(load: Load, ns: str, memory_id: str, max_depth: int, limit: int, *, up: bool) -> Walk:
    """What ``memory_id`` was derived from (``up``) or what was built on it, breadth
    first, excluding itself."""
    start = load(ns, [memory_id], True).get(memory_id)
    if start is None:
        raise NotFoundError(f"no memory {memory_id!r} in this namespace", field="memory_id")
    depths: dict[str, int] = {memory_id: 0}
    found: list[MemoryRecord] = []
    frontier = [start]
    truncated = False
    for depth in range(1, max_depth + 1):
        nxt: list[str] = []
        for rec in frontier:
            for n in _neighbours(rec, up):
                if n not in depths:
                    depths[n] = depth
                    nxt.append(n)
        if not nxt:
            break
        if len(found) + len(nxt) > limit:
            truncated = True
            for n in nxt[limit - len(found) :]:
                del depths[n]
            nxt = nxt[: limit - len(found)]
        loaded = load(ns, nxt, True)
        frontier = [loaded[n] for n in nxt if n in loaded]
        found.extend(frontier)
        if truncated:
            break
    else:
        truncated = any(n not in depths for r in frontier for n in _neighbours(r, up))
    del depths[memory_id]
    return Walk(records=tuple(found), depths=depths, truncated=truncated)


def lineage_view(
    load: Load,
    ns: str,
    wanted: list[str],
    ancestor_depth: int,
    descendant_depth: int,
    limit: int,
    with_history: bool,
) -> LineageView:
    """The records ``wanted`` plus their ancestors (and descendants) in one BFS: the
    ancestor and descendant frontiers are loaded together, one batch per level. Every
    read decision, act and ranking walks it, most for a handful of records: the
    neighbours are gathered inline (no call per record).

    For several ``wanted`` the view is the union of each one's own view: each direction
    keeps its own visited set, so a record first reached walking down from one of them
    (a child of one) is still walked up when it is also an ancestor of another, and its
    other parents are loaded (with one visited set they were not: a batch decided on
    less lineage than a Check of the same memory)."""
    records = load(ns, wanted, with_history)
    missing = () if len(records) == len(wanted) else tuple(i for i in wanted if i not in records)
    up = down = list(records.values())
    seen_up: set[str] = set(records)  # reached walking up (or wanted): not walked up again
    seen_down: set[str] = set(seen_up)
    added = 0
    truncated = False
    for depth in range(1, max(ancestor_depth, descendant_depth) + 1):
        nxt_up: dict[str, None] = {}
        if depth <= ancestor_depth:
            for rec in up:
                for n in rec.dependencies:  # stored: plain ids (validate_new resolved refs)
                    if n not in seen_up:
                        nxt_up[n] = None  # type: ignore[index]  # ids, see above
        nxt_down: dict[str, None] = {}
        if depth <= descendant_depth:
            for rec in down:
                for n in rec.derivations:
                    if n not in seen_down:
                        nxt_down[n] = None
        if not nxt_up and not nxt_down:
            break
        seen_up.update(nxt_up)
        seen_down.update(nxt_down)
        batch = [i for i in {**nxt_up, **nxt_down} if i not in records]
        if added + len(batch) > limit:
            truncated = True
            batch = batch[: limit - added]
        if batch:
            loaded = load(ns, batch, with_history)
            records.update(loaded)
            added += len(loaded)
        up = [records[i] for i in nxt_up if i in records]
        down = [records[i] for i in nxt_down if i in records]
        if truncated:
            break
    return LineageView(records=records, missing=missing, truncated=truncated)


def _neighbours(rec: MemoryRecord, up: bool) -> tuple[str, ...]:
    # stored dependencies are plain ids: validate_new resolved any MemoryRef
    return rec.dependencies if up else rec.derivations  # type: ignore[return-value]  # ids, see above

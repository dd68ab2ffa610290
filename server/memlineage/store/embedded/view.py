"""`lineage_view` over the embedded store's own rows: the records asked for, then their
ancestors (and descendants) breadth first, one level at a time — the records, order,
limit and truncation of the shared walk (`store.traversal.lineage_view`), without
its per-level loader calls and per-record neighbour lookups. Every read decision, act
and ranking asks it, most for a handful of records. The caller holds the store lock."""

from __future__ import annotations

from collections.abc import Mapping

from memlineage.lineage.model import LineageView, MemoryRecord
from memlineage.store.embedded.row import Row


def lineage_view(
    rows: Mapping[str, Row],
    wanted: list[str],
    ancestor_depth: int,
    descendant_depth: int,
    limit: int,
    with_history: bool,
) -> LineageView:
    """`wanted`: distinct checked ids. Records carry their derivations; their status
    history only `with_history` (the same cached objects `_load` hands out)."""
    records: dict[str, MemoryRecord] = {}
    get = rows.get
    for i in wanted:
        row = get(i)
        if row is not None:
            records[i] = _full(row) if with_history else _bare(row)
    missing = () if len(records) == len(wanted) else tuple(i for i in wanted if i not in records)
    up = down = list(records.values())
    added, truncated = 0, False
    for depth in range(1, max(ancestor_depth, descendant_depth) + 1):
        new_up: dict[str, None] = {}
        if depth <= ancestor_depth:
            for rec in up:
                for n in rec.dependencies:  # stored: plain ids (validate_new resolved refs)
                    if n not in records:
                        new_up[n] = None  # type: ignore[index]  # ids, see above
        new_down: dict[str, None] = {}
        if depth <= descendant_depth:
            for rec in down:
                for n in rec.derivations:
                    if n not in records:
                        new_down[n] = None
        batch = list({**new_up, **new_down})
        if not batch:
            break
        if added + len(batch) > limit:
            truncated = True
            batch = batch[: limit - added]
        loaded: dict[str, MemoryRecord] = {}
        for i in batch:
            row = get(i)
            if row is not None:
                loaded[i] = _full(row) if with_history else _bare(row)
        records.update(loaded)
        added += len(loaded)
        up = [loaded[i] for i in new_up if i in loaded]
        down = [loaded[i] for i in new_down if i in loaded]
        if truncated:
            break
    return LineageView(records=records, missing=missing, truncated=truncated)


def _full(row: Row) -> MemoryRecord:
    return row._rec or row.record()


def _bare(row: Row) -> MemoryRecord:
    return (row._rec and row._bare) or row.bare()


__all__ = ["lineage_view"]

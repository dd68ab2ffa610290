"""What the embedded store's two on-disk forms share (the SQLite database of
``persistence`` and the old JSON-lines files of ``legacy``): the refusal to open
(``StoreCorruptError``, the store error of ``lineage.errors``, here with the file
as its path) and the JSON form of a lineage event. The side tables' rows
(grants, proposals) are decoded by the store-level ``decoded_grant`` /
``decoded_proposal``, which the Redis store uses too.
"""

from __future__ import annotations

from typing import Any

from memlineage.lineage.errors import StoreCorruptError as StoreCorruptError
from memlineage.lineage.model import LineageEvent


def event_to_json(e: LineageEvent) -> list[Any]:
    return [
        int(e.cursor),
        e.type,
        e.memory_id,
        e.at,
        e.root_id,
        e.status,
        e.previous_status,
        e.reason,
        e.successor,
        list(e.affected),
        e.version,
        e.deadline,
    ]


def event_from_json(ns: str, d: list[Any]) -> LineageEvent:
    return LineageEvent(
        cursor=str(d[0]),
        type=d[1],
        namespace=ns,
        memory_id=d[2],
        at=d[3],
        root_id=d[4],
        status=d[5],
        previous_status=d[6],
        reason=d[7],
        successor=d[8],
        affected=tuple(d[9]),
        version=d[10],
        deadline=d[11] if len(d) > 11 else None,
    )

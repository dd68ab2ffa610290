"""What the embedded store's two on-disk forms share (the SQLite database of
``persistence`` and the old JSON-lines files of ``legacy``): the refusal to open
(``StoreCorruptError``) and the JSON form of a lineage event.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memlineage.lineage.errors import LineageError
from memlineage.lineage.model import LineageEvent


class StoreCorruptError(LineageError):
    """The embedded store's files cannot be read back as they were written: the
    store refuses to open (nothing on disk is changed). ``path``: the file."""

    code = "STORE_CORRUPT"
    grpc_status = "DATA_LOSS"

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = " ".join(problem.split())  # one line, whatever the cause said
        super().__init__(
            f"embedded store {self.path} cannot be read: {self.problem}; nothing on disk was "
            "changed (restore the file from a backup, or move it away to start "
            "empty)"
        )


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

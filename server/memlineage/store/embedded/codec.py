"""What the embedded store's two on-disk forms share (the SQLite database of
``persistence`` and the old JSON-lines files of ``legacy``): the refusal to open
(``StoreCorruptError``) and the JSON form of a lineage event; and the strict
decoding of the side tables' rows (grants, proposals: ``row_fields`` and the typed
field readers, raising ``RowProblem``).
"""

from __future__ import annotations

import json
import math
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


class RowProblem(ValueError):
    """What is wrong with one row of a side table (grants, proposals): the table's
    loader turns it into ``StoreCorruptError`` naming the table and the row."""


def row_fields(data: object, least: int, most: int) -> list[Any]:
    """A side-table row's ``data`` column: a JSON list of `least` to `most` fields
    (TEXT, or a BLOB of its UTF-8), or ``RowProblem``."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RowProblem(f"is not valid JSON (not UTF-8: {exc})") from None
    if not isinstance(data, str):
        raise RowProblem(f"is not valid JSON (a stored {type(data).__name__})")
    try:
        v = json.loads(data)
    except ValueError as exc:
        raise RowProblem(f"is not valid JSON ({exc})") from None
    if not isinstance(v, list):
        raise RowProblem(f"is not a list of fields (a JSON {type(v).__name__})")
    if not least <= len(v) <= most:
        span = f"{least}" if least == most else f"{least} to {most}"
        raise RowProblem(f"has {len(v)} fields, not {span}")
    return v


def row_text(v: list[Any], i: int, name: str) -> str:
    if not isinstance(v[i], str):
        raise RowProblem(f"field {i} ({name}) is not a string: {v[i]!r}")
    return v[i]


def row_texts(v: list[Any], i: int, name: str) -> tuple[str, ...]:
    if not isinstance(v[i], list) or not all(isinstance(x, str) for x in v[i]):
        raise RowProblem(f"field {i} ({name}) is not a list of strings: {v[i]!r}")
    return tuple(v[i])


def row_int(v: list[Any], i: int, name: str) -> int:
    if isinstance(v[i], bool) or not isinstance(v[i], int):
        raise RowProblem(f"field {i} ({name}) is not an integer: {v[i]!r}")
    return v[i]


def row_number(v: list[Any], i: int, name: str) -> float:
    """A finite number (JSON's NaN and Infinity are not)."""
    x = v[i]
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        raise RowProblem(f"field {i} ({name}) is not a finite number: {x!r}")
    return float(x)

"""The embedded store's snapshot as it is written: rows column-wise in parts of
`CHUNK_ROWS` (a column every row of a part holds at its default is left out), then
the header (part 0), each part checksummed (`crc`); `write_snapshot` replaces the
snapshot and the ops it covers in one transaction. `persistence` reads them back."""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Iterator
from dataclasses import MISSING
from operator import attrgetter
from typing import Any

from memlineage.store.embedded.codec import event_to_json
from memlineage.store.embedded.row import FIELD_DEFAULTS, ROW_FIELDS, Row
from memlineage.store.embedded.sqlite_conn import transaction
from memlineage.store.embedded.state import State

FORMAT = "2"
"""2: the revision op ("V") and the snapshot's kept versions. A format-1 database is
a valid format-2 one (it only lacks them): read as is, marked 2 when opened for
writing, so a version that would not know "V" refuses it instead of skipping it."""
CHUNK_ROWS = 5000
"""Rows per snapshot part."""
_NO_DEFAULT = MISSING


def crc(position: int, text: str) -> int:
    """The checksum of a stored JSON text at ``position`` (an op's seq, a part number)."""
    return zlib.crc32(text.encode("utf-8"), position & 0xFFFFFFFF)


# One encoder: `json.dumps` with options builds a new one at every call.
_ENCODER = json.JSONEncoder(separators=(",", ":"))


def dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def row_columns(chunk: list[Row]) -> dict[str, list[Any]]:
    """A chunk's rows column-wise, without the columns every row of it has at the
    field's default (``None``, ``()``, ``0``: most fields of most rows; a reader
    fills a missing column with the default): less text to write and to parse."""
    out: dict[str, list[Any]] = {}
    for f in ROW_FIELDS:
        col = list(map(attrgetter(f), chunk))
        default = FIELD_DEFAULTS.get(f, _NO_DEFAULT)
        if default is _NO_DEFAULT or col.count(default) != len(col):
            out[f] = col
    return out


def snapshot_parts(state: State, seq: int) -> Iterator[tuple[int, str]]:
    """The snapshot as (part, JSON text): rows column-wise in chunks of CHUNK_ROWS,
    then the header (part 0).  Rows keep insertion order (the columns' order)."""
    part = 0
    header: dict[str, Any] = {}
    for ns, sp in state.spaces.items():
        rows = list(sp.rows.values())
        nxt = sp.review.next
        for start in range(0, len(rows), CHUNK_ROWS):
            chunk = rows[start : start + CHUNK_ROWS]
            part += 1
            yield (
                part,
                dumps(
                    {
                        "n": ns,
                        "c": row_columns(chunk),
                        "v": [nxt.get(r.id) for r in chunk],
                    }
                ),
            )
        header[ns] = {
            "rows": len(rows),
            "claims": [[s, a, i] for (s, a), i in sp.claims.items()],
            "counters": sp.counters,
            "sources": sp.sources,
            "seq": sp.seq,
            "events": [event_to_json(e) for e in sp.events],
            "versions": sp.versions,
        }
    yield (
        0,
        dumps(
            {"format": FORMAT, "seq": seq, "parts": part, "fields": ROW_FIELDS, "spaces": header}
        ),
    )


def write_snapshot(db: sqlite3.Connection, state: State, seq: int) -> None:
    """Replace the snapshot and the ops it covers, in one transaction."""
    with transaction(db):
        db.execute("DELETE FROM snapshot")
        for part, text in snapshot_parts(state, seq):
            db.execute(
                "INSERT INTO snapshot (part, data, crc) VALUES (?, ?, ?)",
                (part, text, crc(part, text)),
            )
        db.execute("DELETE FROM ops WHERE seq <= ?", (seq,))

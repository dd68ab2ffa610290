"""Reading the embedded store's database strictly, read-only (`persistence`'s open
and `memlineage store check`): every check an open makes before anything is written
(SQLite's quick check, every checksum, contiguous ops, a replay that must apply), and
the refusal of a write-ahead log whose database is missing (`stray_log`). Kept apart
from the writer (`persistence.SqliteLog`) so that each stays readable."""

from __future__ import annotations

import contextlib
import gc
import json
import sqlite3
from collections.abc import Iterator
from itertools import repeat
from pathlib import Path
from typing import Any

from memlineage.lineage.errors import TOO_DEEP
from memlineage.store.embedded.codec import StoreCorruptError, event_from_json
from memlineage.store.embedded.row import FIELD_DEFAULTS, ROW_FIELDS, Row
from memlineage.store.embedded.score_mirror import SCORED
from memlineage.store.embedded.snapshot_parts import FORMAT, crc
from memlineage.store.embedded.sqlite_conn import cannot_open, connect_ro
from memlineage.store.embedded.state import State

READABLE = frozenset({"1", FORMAT})


FREEZE_ROWS = 20_000
"""A load of at least this many rows moves every object out of the collector's
generations (``gc.freeze``) before the collector runs again: else its first pass
scans each loaded object as young (~0.2 s per 300,000 rows) and every full pass
while serving scans them all again.  Frozen objects are still freed by their
reference counts (a deleted row); smaller loads are not worth it."""


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """Loading builds millions of objects and no cycles: the collector would only
    rescan them (seconds for a million rows)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _decode(path: Path, what: str, position: int, text: str, stored: int) -> Any:
    if crc(position, text) != stored:
        raise StoreCorruptError(
            path, f"{what} fails its checksum (the stored text was changed after it was written)"
        )
    try:
        return json.loads(text)
    except ValueError as exc:
        raise StoreCorruptError(path, f"{what} is not valid JSON ({exc})") from exc
    except RecursionError:
        raise StoreCorruptError(path, f"{what} is not valid JSON ({TOO_DEEP})") from None


def _problem(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"refers to {exc.args[0]!r}, which is not stored"
    return f"{type(exc).__name__}: {exc}"


def _load_snapshot(db: sqlite3.Connection, path: Path, state: State) -> int:
    """Load the snapshot (if any) into ``state``; returns the last op it covers."""
    cur = db.execute("SELECT part, data, crc FROM snapshot ORDER BY part")
    first = cur.fetchone()
    if first is None:
        return 0
    part, data, stored = first
    if part != 0:
        raise StoreCorruptError(path, "the snapshot's header (part 0) is missing")
    header = _decode(path, "the snapshot's header", 0, data, stored)
    try:
        parts, seq = int(header["parts"]), int(header["seq"])
        names = [str(f) for f in header["fields"]]
        spaces: dict[str, Any] = header["spaces"]
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreCorruptError(path, f"the snapshot's header is incomplete ({exc!r})") from exc
    known = [f for f in names if f in ROW_FIELDS]
    loaded: dict[str, list[Row]] = {ns: [] for ns in spaces}
    # the score columns' fields as read, per namespace: `link_many` copies them
    # into the columns instead of reading them back from every row
    mirrored = [f for f in ROW_FIELDS if f in SCORED]
    scored: dict[str, dict[str, list[Any]]] = {ns: {f: [] for f in mirrored} for ns in spaces}
    expected = 1
    for part, data, stored in cur:
        if part != expected:
            raise StoreCorruptError(path, f"snapshot part {expected} is missing")
        what = f"snapshot part {part}"
        chunk = _decode(path, what, part, data, stored)
        try:
            ns, columns, review = chunk["n"], chunk["c"], chunk["v"]
            rows = Row.bulk_from_columns(
                {f: columns[f] for f in known if f in columns}, len(review)
            )
            sp = state.space(ns)
            ids = [row.id for row in rows]
            # all rows first: a link may go to a later row
            sp.rows.update(zip(ids, rows, strict=True))
            due = zip(ids, review, strict=True)
            sp.review.next.update((i, at) for i, at in due if at is not None)
            loaded[ns].extend(rows)
            for f, col in scored[ns].items():  # a column a part omits: its default
                given = columns[f] if f in columns and f in known else None
                col.extend(repeat(FIELD_DEFAULTS[f], len(rows)) if given is None else given)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise StoreCorruptError(path, f"{what} is malformed ({_problem(exc)})") from exc
        expected += 1
    if expected != parts + 1:
        raise StoreCorruptError(path, f"the snapshot has {expected - 1} of its {parts} parts")
    for ns, sp_data in spaces.items():
        what = f"the snapshot of namespace {ns!r}"
        try:
            rows = loaded[ns]
            if len(rows) != sp_data["rows"]:
                raise ValueError(f"{len(rows)} rows stored, {sp_data['rows']} written")
            state.link_many(ns, rows, scored[ns])
            sp = state.space(ns)
            sp.review.rebuild()
            sp.claims = {(s, a): i for s, a, i in sp_data["claims"]}
            for claimed in sp.claims.values():
                sp.rows[claimed]  # a claim of a memory not stored: KeyError, corrupt
            sp.counters = {
                name: [float(t) for t in times] for name, times in sp_data["counters"].items()
            }
            sp.sources = {
                src: [float(ok), float(bad)] for src, (ok, bad) in sp_data["sources"].items()
            }
            sp.seq = int(sp_data["seq"])
            sp.versions = {i: list(kept) for i, kept in sp_data.get("versions", {}).items()}
            for revised in sp.versions:
                sp.rows[revised]  # versions of a memory not stored: KeyError, corrupt
            sp.events.extend(event_from_json(ns, e) for e in sp_data["events"])
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise StoreCorruptError(path, f"{what} is malformed ({_problem(exc)})") from exc
    return seq


def _replay(db: sqlite3.Connection, path: Path, state: State, after: int) -> tuple[int, int, int]:
    """Replay the ops after the snapshot; returns (last seq, ops, bytes of op text)."""
    seq, n, size = after, 0, 0
    for stored_seq, text, stored in db.execute("SELECT seq, op, crc FROM ops ORDER BY seq"):
        if stored_seq <= after:
            raise StoreCorruptError(
                path, f"op {stored_seq} is also covered by the snapshot (of op {after})"
            )
        if stored_seq != seq + 1:
            raise StoreCorruptError(path, f"ops {seq + 1}..{stored_seq - 1} are missing")
        op = _decode(path, f"op {stored_seq}", stored_seq, text, stored)
        try:
            state.apply(op)
        except Exception as exc:  # anything a hand-edited op can make apply raise
            raise StoreCorruptError(
                path, f"op {stored_seq} cannot be replayed: {_problem(exc)}"
            ) from exc
        seq, n, size = stored_seq, n + 1, size + len(text)
    return seq, n, size


def stray_log(path: Path) -> None:
    """Refuse, before SQLite sees them, a write-ahead log whose database is missing or
    empty: SQLite would take the log for a new database's (and delete it on close, or
    replay it into a new file, a malformed one), losing the acknowledged ops it holds
    (an outside audit: `store check` deleted it; a start after moving the database
    away made a broken new one)."""
    wal = Path(f"{path}-wal")
    if not wal.exists():
        return
    size = wal.stat().st_size
    if size == 0:  # holds nothing
        return
    if not path.exists():
        state = "is missing"
    elif path.stat().st_size == 0:
        state = "is empty"
    else:
        return
    raise StoreCorruptError(
        path,
        f"{state}, but its write-ahead log {wal.name} ({size:,} bytes) is here: the ops "
        "of a database moved, deleted or emptied; put the database back beside it (from a "
        "backup), or move the -wal and -shm files away too to start empty",
    )


def read_store(path: Path, state: State) -> tuple[int, int, int, int]:
    """Check and load the database at ``path`` into ``state`` (empty), read-only.
    Returns (snapshot seq, last seq, ops after the snapshot, their bytes). Its callers
    refused a stray write-ahead log first (`stray_log`)."""
    try:
        db = connect_ro(path)
    except sqlite3.Error as exc:
        raise cannot_open(path, exc) or StoreCorruptError(
            path, f"cannot be opened ({exc})"
        ) from exc
    try:
        with _no_gc():
            try:
                db.execute("BEGIN")  # one read transaction: a live writer's snapshot
                # (ops folded in meanwhile) cannot come between the reads
                tables = {
                    r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                }
                if not {"meta", "ops", "snapshot"} <= tables:
                    raise StoreCorruptError(
                        path,
                        f"is not a MemLineage store (its tables are {sorted(tables) or 'none'})",
                    )
                problems = [r[0] for r in db.execute("PRAGMA quick_check(5)")]
                if problems != ["ok"]:
                    raise StoreCorruptError(
                        path, "SQLite integrity check: " + "; ".join(map(str, problems))
                    )
                fmt = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
                if fmt is None or fmt[0] not in READABLE:
                    raise StoreCorruptError(
                        path,
                        f"format {fmt[0] if fmt else 'missing'} is not this version's ({FORMAT})",
                    )
                snap = _load_snapshot(db, path, state)
                last, n, size = _replay(db, path, state, snap)
                if sum(len(sp.rows) for sp in state.spaces.values()) >= FREEZE_ROWS:
                    gc.freeze()
            except sqlite3.Error as exc:
                raise cannot_open(path, exc) or StoreCorruptError(path, f"SQLite: {exc}") from exc
    finally:
        db.close()
    return snap, last, n, size

"""A side table's tally (grants, proposals): how many writes it has committed, how
many rows it holds and the XOR of their checksums, kept in ``meta`` in the same
transaction as the rows.

Two losses the rows' own checksums cannot show: a row deleted by hand (every row left
still holds its checksum), and a cut write-ahead log that drops the table's last
writes whole (a spent grant use given back). The first changes the rows' count or
XOR against the tally; the second leaves the tally behind the head record
(`op_head`), which carries the write count, written after each commit."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlineage.store.embedded.codec import StoreCorruptError
from memlineage.store.embedded.op_head import Head, OpHead, check_table
from memlineage.store.embedded.sqlite_conn import cannot_open, connect_ro, transaction
from memlineage.store.embedded.summed_rows import is_summed_in

Key = tuple[str, str]  # (namespace, the row's key)


@dataclass(frozen=True, slots=True)
class Counts:
    writes: int
    rows: int
    xor: int


@dataclass(frozen=True, slots=True)
class Staged:
    """A tally worked out for a change not yet committed: the counts, and each
    row's new checksum (None: deleted)."""

    counts: Counts
    change: dict[Key, int | None]


def _key(table: str) -> str:
    return f"tally:{table}"


class TableTally:
    """One side table's tally, in memory and in ``meta``. `stage` works out the
    tally after a change, `save` writes it inside the change's transaction, and
    `committed` takes it once that transaction committed (a rolled-back change
    leaves the tally as it was)."""

    def __init__(self, table: str, head: OpHead | None) -> None:
        self.table = table
        self._head = head
        self._crcs: dict[Key, int] = {}
        self._counts = Counts(0, 0, 0)

    def opened(
        self,
        db: sqlite3.Connection | None,
        path: Path | None,
        rows: Iterable[tuple[Key, int]],
        kept: Head | None,
        close: Callable[[], None],
    ) -> None:
        """`load` for a side table just opened (nothing without a file); a refusal
        calls `close` first, so the open leaves nothing behind."""
        if db is None or path is None:
            return
        try:
            self.load(db, path, rows, kept)
        except BaseException:
            close()
            raise

    def load(
        self, db: sqlite3.Connection, path: Path, rows: Iterable[tuple[Key, int]], kept: Head | None
    ) -> None:
        """Check the loaded rows (key, checksum) against the stored tally, and the
        tally against the head record `kept` (``StoreCorruptError``); a table
        without a tally yet (written before it) is given one."""
        self._crcs = dict(rows)
        stored = read_tally(db, path, self.table)
        found = _counts(self._crcs.values(), stored.writes if stored else 0)
        if stored is not None:
            _compare(path, self.table, found, stored)
        check_table(path, self.table, found.writes, kept)
        self._counts = found
        if stored is None:
            with transaction(db):
                self.save(db, found)

    def stage(self, put: Sequence[tuple[Key, int]], dropped: Sequence[Key] = ()) -> Staged:
        """The tally once rows `dropped` are deleted, then rows `put` (key, checksum)
        written (new or replacing)."""
        change: dict[Key, int | None] = dict.fromkeys(dropped)
        change.update(put)
        rows, xor = self._counts.rows, self._counts.xor
        for key, new in change.items():
            old = self._crcs.get(key)
            if old is not None:
                rows, xor = rows - 1, xor ^ old
            if new is not None:
                rows, xor = rows + 1, xor ^ new
        return Staged(Counts(self._counts.writes + 1, rows, xor), change)

    def save(self, db: sqlite3.Connection, counts: Counts) -> None:
        """Write `counts` into ``meta`` (inside the caller's transaction)."""
        value = json.dumps({"writes": counts.writes, "rows": counts.rows, "xor": counts.xor})
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (_key(self.table), value))

    def committed(self, staged: Staged) -> None:
        """Take the staged tally once its transaction committed, and tell the head."""
        for key, new in staged.change.items():
            if new is None:
                self._crcs.pop(key, None)
            else:
                self._crcs[key] = new
        self._counts = staged.counts
        if self._head is not None:
            self._head.side_committed(self.table, staged.counts.writes)


def read_tally(db: sqlite3.Connection, path: Path, table: str) -> Counts | None:
    """The tally ``meta`` holds for `table` (None: none yet); one that does not
    read back as written is ``StoreCorruptError``."""
    try:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (_key(table),)).fetchone()
    except sqlite3.Error as exc:
        raise StoreCorruptError(path, f"the meta table cannot be read ({exc})") from exc
    if row is None:
        return None
    try:
        v = json.loads(row[0])
        counts = Counts(int(v["writes"]), int(v["rows"]), int(v["xor"]))
    except (ValueError, TypeError, KeyError, RecursionError):
        raise StoreCorruptError(
            path, f"the {table} table's tally in meta does not read back ({row[0]!r:.80})"
        ) from None
    return counts


def read_for_check(
    path: Path, table: str, key_column: str
) -> tuple[list[Any], bool, Counts | None]:
    """`memlineage store check`'s read of side table `table`, read-only and in one read
    transaction (one snapshot): its ``(ns, key, data, crc)`` rows (crc None before the
    column existed), whether ``meta`` says every row is summed, and its tally. Read
    apart, a live writer's commit between the rows and the tally was reported as a row
    replaced by hand (an outside audit: about half the checks of a serving store)."""
    try:
        db = connect_ro(path)
    except sqlite3.Error as exc:
        problem = StoreCorruptError(path, f"the {table} table cannot be read ({exc})")
        raise cannot_open(path, exc) or problem from exc
    try:
        db.execute("BEGIN")
        cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
        rows: list[Any] = []
        if cols:
            crc = "crc" if "crc" in cols else "NULL"
            rows = db.execute(f"SELECT ns, {key_column}, data, {crc} FROM {table}").fetchall()
        has_meta = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
        ).fetchone()
        summed = bool(has_meta) and is_summed_in(db, table)
        stored = read_tally(db, path, table) if has_meta else None
    except sqlite3.Error as exc:
        problem = StoreCorruptError(path, f"the {table} table cannot be read ({exc})")
        raise cannot_open(path, exc) or problem from exc
    finally:
        db.close()
    return rows, summed, stored


def check_tally(
    path: Path, table: str, crcs: Iterable[int], stored: Counts | None, kept: Head | None
) -> None:
    """`memlineage store check`'s look at `table`'s tally: the rows' checksums against
    `stored` (read with them, `read_for_check`), and it against the head record
    `kept`."""
    found = _counts(crcs, stored.writes if stored else 0)
    if stored is not None:
        _compare(path, table, found, stored)
    check_table(path, table, found.writes, kept)


def _counts(crcs: Iterable[int], writes: int) -> Counts:
    rows = xor = 0
    for crc in crcs:
        rows, xor = rows + 1, xor ^ crc
    return Counts(writes, rows, xor)


def _compare(path: Path, table: str, found: Counts, stored: Counts) -> None:
    if found.rows != stored.rows:
        raise StoreCorruptError(
            path,
            f"the {table} table holds {found.rows:,} rows, but its tally says "
            f"{stored.rows:,} (rows removed or added by hand)",
        )
    if found.xor != stored.xor:
        raise StoreCorruptError(
            path,
            f"the {table} table's rows are not the ones its tally was written for "
            "(a row replaced by hand)",
        )

"""Grants of the embedded store: held in memory, and with a data directory written
through to a table of their own in the store's SQLite file (on a connection of its
own, like the kept decisions), so an acknowledged grant or spent use outlives a
SIGKILL. Not part of the op log or the snapshot; each row carries a checksum
(`summed_rows`): a row that does not decode as the store wrote it, or no longer holds
its checksum (a hand-edited `used` count), refuses the open (``StoreCorruptError``,
naming the row), and `store check` reads them too (`check_grants`)."""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from memlineage.lineage.errors import (
    AlreadyExistsError,
    GrantLimitError,
    StoreUnavailableError,
)
from memlineage.lineage.grants import GrantRecord
from memlineage.store.embedded.codec import StoreCorruptError
from memlineage.store.embedded.op_head import Head, OpHead
from memlineage.store.embedded.sqlite_conn import open_loaded, transaction, write_refused
from memlineage.store.embedded.summed_rows import (
    add_crc_column,
    check_row,
    is_summed,
    mark_summed,
    row_crc,
)
from memlineage.store.embedded.table_tally import TableTally, check_tally, read_for_check
from memlineage.store.grants import MAX_GRANTS_PER_NAMESPACE, DecodeProblem, decoded_grant

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS grants (ns TEXT NOT NULL, id TEXT NOT NULL, "
    "data TEXT NOT NULL, crc INTEGER, PRIMARY KEY (ns, id)) WITHOUT ROWID",
)


class GrantTable:
    """Every namespace's grants; `use` spends uses under one lock, in one SQLite
    transaction when there is a file: all of the named grants or none. `cap`: the
    grants a namespace holds at most (``put`` makes room by dropping inert ones)."""

    def __init__(
        self,
        path: Path | None = None,
        fsync: bool = False,
        cap: int = MAX_GRANTS_PER_NAMESPACE,
        *,
        head: OpHead | None = None,
        kept: Head | None = None,
    ) -> None:
        """`head`: the data directory's head record, told of each committed write;
        `kept`: what it said when the store opened (`table_tally`)."""
        self._cap = cap
        self._lock = threading.Lock()
        self._by_ns: dict[str, dict[str, GrantRecord]] = {}
        self._tally = TableTally("grants", head)
        required = False
        self._path = path
        if path is not None and path.exists():
            add_crc_column(path, "grants")
            required = is_summed(path, "grants")
        self._db, loaded = open_loaded(
            path,
            fsync,
            _SCHEMA,
            "grants",
            "SELECT ns, id, data, crc FROM grants",
            functools.partial(_decoded, required=required),
        )
        summed = [((g.namespace, g.id), crc) for g, crc in loaded if crc is not None]
        self._tally.opened(self._db, path, summed, kept, self.close)
        unsummed = [g for g, crc in loaded if crc is None]
        if unsummed:  # rows written before the checksum: given theirs once
            self._write(unsummed, [])
        if self._db is not None and not required:  # from now on, a row without one is damage
            with transaction(self._db):
                mark_summed(self._db, "grants")
        loaded_grants = [g for g, _ in loaded]
        for g in sorted(loaded_grants, key=lambda g: (g.created_at, g.id)):  # oldest first
            self._by_ns.setdefault(g.namespace, {})[g.id] = g

    def put(self, grant: GrantRecord, now: float) -> None:
        with self._lock:
            mine = self._by_ns.setdefault(grant.namespace, {})
            if grant.id in mine:
                raise AlreadyExistsError(f"grant {grant.id!r} exists in {grant.namespace!r}")
            dropped = self._overflow(grant.namespace, mine, now)
            self._write([grant], [(grant.namespace, gid) for gid in dropped])
            for gid in dropped:
                del mine[gid]
            mine[grant.id] = grant

    def _overflow(self, namespace: str, mine: dict[str, GrantRecord], now: float) -> list[str]:
        """Ids to drop so one more fits under the cap: only grants inert at `now` (not
        ``effective``: spent, expired, not yet valid, not a user's), oldest first
        (created_at, id); a live grant is never dropped: ``GrantLimitError`` when too
        few are inert (nothing dropped)."""
        excess = len(mine) - self._cap + 1
        if excess <= 0:
            return []
        inert = sorted(
            (g for g in mine.values() if not g.effective(now)), key=lambda g: (g.created_at, g.id)
        )
        if len(inert) < excess:
            raise GrantLimitError(namespace, self._cap)
        return [g.id for g in inert[:excess]]

    def grants(self, namespace: str) -> list[GrantRecord]:
        with self._lock:
            return list(self._by_ns.get(namespace, {}).values())

    def use(self, namespace: str, ids: Sequence[str], now: float) -> bool:
        with self._lock:
            mine = self._by_ns.get(namespace, {})
            found = [mine.get(i) for i in ids]
            if any(g is None or not g.effective(now) for g in found):
                return False
            spent = [g.spent() for g in found if g is not None]
            self._write(spent, [])
            for g in spent:
                mine[g.id] = g
            return True

    def _write(self, grants: Sequence[GrantRecord], dropped: Sequence[tuple[str, str]]) -> None:
        """Write through before memory changes: a failed write changes nothing.
        `dropped`: (namespace, id) of each grant to delete (an id is unique only
        within its namespace)."""
        if self._db is None:
            return
        rows = [(g.namespace, g.id, g.to_json()) for g in grants]
        summed = [(ns, gid, data, row_crc(ns, gid, data)) for ns, gid, data in rows]
        staged = self._tally.stage([((ns, gid), crc) for ns, gid, _, crc in summed], dropped)
        try:
            with transaction(self._db):
                for ns, gid in dropped:
                    self._db.execute("DELETE FROM grants WHERE ns = ? AND id = ?", (ns, gid))
                self._db.executemany("INSERT OR REPLACE INTO grants VALUES (?, ?, ?, ?)", summed)
                self._tally.save(self._db, staged.counts)
        except sqlite3.Error as exc:
            raise StoreUnavailableError(
                f"embedded store: writing grants failed ({write_refused(self._path, exc)})"
            ) from exc
        self._tally.committed(staged)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def _decoded(
    path: Path, ns: object, gid: object, data: object, crc: object, *, required: bool = False
) -> tuple[GrantRecord, int | None]:
    """A grants row as `GrantRecord.to_json` wrote it (``store.grants.decoded_grant``)
    and the checksum it carries (None: a row written before it), else
    ``StoreCorruptError`` naming the file and the row."""
    summed = check_row(path, "grants", "id", ns, gid, data, crc, summed=required)
    try:
        return decoded_grant(data, ns, gid), (crc if summed and type(crc) is int else None)
    except DecodeProblem as exc:
        raise StoreCorruptError(path, f"grants row (ns {ns!r}, id {gid!r}) {exc}") from None


def check_grants(path: Path, kept: Head | None = None) -> int:
    """`memlineage store check`'s look at the grants table, read-only: every row decodes
    and holds its checksum, the rows are the ones its tally counts, and the tally is
    not behind the head record `kept` (StoreCorruptError); how many rows there are."""
    rows, required, stored = read_for_check(path, "grants", "id")
    crcs = [_decoded(path, *row, required=required)[1] for row in rows]
    check_tally(path, "grants", [c for c in crcs if c is not None], stored, kept)
    return len(rows)

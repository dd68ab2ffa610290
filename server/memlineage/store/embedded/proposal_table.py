"""Proposals of the embedded store: in memory, and with a data directory written
through to a table of their own in the store's SQLite file (on a connection of its
own, like grants), so a pending or postponed proposal outlives a restart. Its Watch
event is emitted under the store's lock; like every event it is kept in the next
snapshot (a crash before one loses the event, never the proposal). Each row carries a
checksum (`summed_rows`): a row that does not decode as the store wrote it, or no
longer holds its checksum (a hand-edited proposed status or time), refuses the open
(``StoreCorruptError``, naming the row), and `store check` reads them too
(`check_proposals`)."""

from __future__ import annotations

import functools
import sqlite3
import threading
from pathlib import Path

from memlineage.lineage.errors import StoreUnavailableError
from memlineage.lineage.proposals import Proposal
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
from memlineage.store.embedded.table_tally import Staged, TableTally, check_tally, read_for_check
from memlineage.store.proposals import DecodeProblem, decoded_proposal

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS proposals (ns TEXT NOT NULL, memory TEXT NOT NULL, "
    "data TEXT NOT NULL, crc INTEGER, PRIMARY KEY (ns, memory)) WITHOUT ROWID",
)


class ProposalTable:
    def __init__(
        self,
        path: Path | None = None,
        fsync: bool = False,
        *,
        head: OpHead | None = None,
        kept: Head | None = None,
    ) -> None:
        """`head`: the data directory's head record, told of each committed write;
        `kept`: what it said when the store opened (`table_tally`)."""
        self._lock = threading.Lock()
        self._rows: dict[tuple[str, str], Proposal] = {}
        self._tally = TableTally("proposals", head)
        required = False
        self._path = path
        if path is not None and path.exists():
            add_crc_column(path, "proposals")
            required = is_summed(path, "proposals")
        self._db, loaded = open_loaded(
            path,
            fsync,
            _SCHEMA,
            "proposals",
            "SELECT ns, memory, data, crc FROM proposals",
            functools.partial(_decoded, required=required),
        )
        summed = [((p.namespace, p.memory_id), crc) for p, crc in loaded if crc is not None]
        self._tally.opened(self._db, path, summed, kept, self.close)
        for p, crc in loaded:
            self._rows[(p.namespace, p.memory_id)] = p
            if crc is None:  # a row written before the checksum: given its own once
                self._save_row(p)
        if self._db is not None and not required:  # from now on, a row without one is damage
            with transaction(self._db):
                mark_summed(self._db, "proposals")

    def _save_row(self, p: Proposal) -> None:
        data = p.to_json()
        crc = row_crc(p.namespace, p.memory_id, data)
        self._write(
            "INSERT OR REPLACE INTO proposals VALUES (?, ?, ?, ?)",
            (p.namespace, p.memory_id, data, crc),
            self._tally.stage([((p.namespace, p.memory_id), crc)]),
        )

    def save(self, p: Proposal) -> None:
        with self._lock:
            self._save_row(p)
            self._rows[(p.namespace, p.memory_id)] = p

    def get(self, ns: str, memory_id: str) -> Proposal | None:
        with self._lock:
            return self._rows.get((ns, memory_id))

    def drop(self, ns: str, memory_id: str) -> None:
        with self._lock:
            if (ns, memory_id) in self._rows:
                self._write(
                    "DELETE FROM proposals WHERE ns = ? AND memory = ?",
                    (ns, memory_id),
                    self._tally.stage([], [(ns, memory_id)]),
                )
                del self._rows[(ns, memory_id)]

    def _write(self, sql: str, args: tuple[str | int, ...], staged: Staged) -> None:
        """One change and the tally after it (`staged`), in one transaction."""
        if self._db is None:
            return
        try:
            with transaction(self._db):
                self._db.execute(sql, args)
                self._tally.save(self._db, staged.counts)
        except sqlite3.Error as exc:
            raise StoreUnavailableError(
                f"embedded store: writing proposals failed ({write_refused(self._path, exc)})"
            ) from exc
        self._tally.committed(staged)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def _decoded(
    path: Path,
    ns: object,
    memory: object,
    data: object,
    crc: object,
    *,
    required: bool = False,
) -> tuple[Proposal, int | None]:
    """A proposals row as `Proposal.to_json` wrote it (``store.proposals.
    decoded_proposal``) and the checksum it carries (None: a row written before it),
    else ``StoreCorruptError`` naming the file and the row."""
    summed = check_row(path, "proposals", "memory", ns, memory, data, crc, summed=required)
    try:
        return decoded_proposal(data, ns, memory), (crc if summed and type(crc) is int else None)
    except DecodeProblem as exc:
        raise StoreCorruptError(
            path, f"proposals row (ns {ns!r}, memory {memory!r}) {exc}"
        ) from None


def check_proposals(path: Path, kept: Head | None = None) -> int:
    """`memlineage store check`'s look at the proposals table, read-only: every row
    decodes and holds its checksum, the rows are the ones its tally counts, and the
    tally is not behind the head record `kept` (StoreCorruptError); how many."""
    rows, required, stored = read_for_check(path, "proposals", "memory")
    crcs = [_decoded(path, *row, required=required)[1] for row in rows]
    check_tally(path, "proposals", [c for c in crcs if c is not None], stored, kept)
    return len(rows)

"""The kept decisions of a data directory (`LineageStore.keep_decisions`): tables
of their own in the store's SQLite file, on a connection of their own, so a batch
of decisions never holds the store's lock; not part of the op log, the snapshot
or `store check`.

Like every other write of the store, a batch is refused (StoreUnavailableError) once
the database is no longer the file opened (`file_watch`): before, batches went on
being committed into a removed file, each flush counted as written and dropped from
the engine's queue, read back by Explain from that connection and lost at the next
start. The file is looked at inside the batch's transaction, last before its commit
(a batch that finds it gone is rolled back: never read back from a file no longer
there), and again after the commit (removed in between)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from memlineage.lineage.decisions import KeptDecision
from memlineage.lineage.errors import StoreUnavailableError
from memlineage.store.embedded.op_head import OpHead
from memlineage.store.embedded.sqlite_conn import connect_rw, transaction, write_refused

_DECISION_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS decisions (seq INTEGER PRIMARY KEY, "
    "id TEXT NOT NULL UNIQUE, ns TEXT NOT NULL, data TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS decisions_ns ON decisions (ns, seq)",
    "CREATE TABLE IF NOT EXISTS decision_memories (ns TEXT NOT NULL, memory TEXT NOT NULL, "
    "seq INTEGER NOT NULL, PRIMARY KEY (ns, memory, seq)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS decision_memories_seq ON decision_memories (seq)",
)


_DECISION_CHUNK = 1000
"""Decisions per transaction of ``DecisionTable.keep``."""


class DecisionTable:
    """The kept decisions of a data directory (`LineageStore.keep_decisions`): one row
    per decision (its `KeptDecision.to_json`), one per (decision, memory) for Explain's
    lookup, the newest `retention` per namespace. A connection and a lock of its own,
    so a batch never holds the store's lock (readers go on; a writer of the op log
    may wait for the batch's commit, SQLite's one writer)."""

    def __init__(self, path: Path, fsync: bool, head: OpHead | None = None) -> None:
        """`head`: the data directory's head record, whose watch on the database
        (`OpHead.still_there`) each batch asks."""
        self._lock = threading.Lock()
        self._head = head
        self._path = path
        self._db: sqlite3.Connection | None = connect_rw(path, fsync)
        with self._lock, transaction(self._db):
            for statement in _DECISION_SCHEMA:
                self._db.execute(statement)

    def keep(self, namespace: str, entries: Sequence[KeptDecision], retention: int) -> None:
        """One transaction per `_DECISION_CHUNK` (an op-log write waits for one chunk at
        most); only the newest `retention` of `entries` are written."""
        retention = max(1, retention)
        entries = entries[-retention:]
        for start in range(0, len(entries), _DECISION_CHUNK):
            self._keep(namespace, entries[start : start + _DECISION_CHUNK], retention)

    def _keep(self, namespace: str, entries: Sequence[KeptDecision], retention: int) -> None:
        with self._lock:
            db = self._db
            if db is None or not entries:
                return
            head = self._head
            watch = head.watch if head is not None else None
            if watch is not None and watch.gone:
                watch.check()  # refused without writing into the file no longer there
            try:
                with transaction(db):
                    for e in entries:
                        cur = db.execute(
                            "INSERT OR IGNORE INTO decisions (id, ns, data) VALUES (?, ?, ?)",
                            (e.decision_id, namespace, e.to_json()),
                        )
                        if cur.rowcount:
                            seq = cur.lastrowid
                            db.executemany(
                                "INSERT OR IGNORE INTO decision_memories VALUES (?, ?, ?)",
                                [(namespace, m, seq) for m in e.memory_ids],
                            )
                    cut = db.execute(
                        "SELECT seq FROM decisions WHERE ns = ? ORDER BY seq DESC LIMIT 1 OFFSET ?",
                        (namespace, retention),
                    ).fetchone()
                    if cut is not None:
                        db.execute(
                            "DELETE FROM decision_memories WHERE seq IN (SELECT seq "
                            "FROM decisions WHERE ns = ? AND seq <= ?)",
                            (namespace, cut[0]),
                        )
                        db.execute(
                            "DELETE FROM decisions WHERE ns = ? AND seq <= ?", (namespace, cut[0])
                        )
                    if head is not None:  # gone: rolled back, never read back from it
                        head.still_there()
            except sqlite3.Error as exc:
                raise StoreUnavailableError(
                    f"embedded store: keeping decisions failed ({write_refused(self._path, exc)})"
                ) from exc
            if head is not None:  # removed between that look and the commit
                head.still_there()

    def recent(self, namespace: str, memory_id: str, limit: int) -> list[KeptDecision]:
        with self._lock:
            if self._db is None:
                return []
            rows = self._db.execute(
                "SELECT d.data FROM decision_memories m JOIN decisions d ON d.seq = m.seq "
                "WHERE m.ns = ? AND m.memory = ? ORDER BY m.seq DESC LIMIT ?",
                (namespace, memory_id, max(0, limit)),
            ).fetchall()
        found = (KeptDecision.from_json(r[0]) for r in rows)
        return [k for k in found if k is not None]

    def get(self, namespace: str, decision_id: str) -> KeptDecision | None:
        with self._lock:
            if self._db is None:
                return None
            row = self._db.execute(
                "SELECT data FROM decisions WHERE id = ? AND ns = ?", (decision_id, namespace)
            ).fetchone()
        return KeptDecision.from_json(row[0]) if row is not None else None

    def count(self, namespace: str) -> int:
        with self._lock:
            if self._db is None:
                return 0
            return int(
                self._db.execute(
                    "SELECT count(*) FROM decisions WHERE ns = ?", (namespace,)
                ).fetchone()[0]
            )

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

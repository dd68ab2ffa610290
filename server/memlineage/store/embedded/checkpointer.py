"""Checkpoints of the store file's write-ahead log, on a thread of their own.

SQLite's automatic checkpoint runs inside the commit that crosses its threshold:
that one write pays for copying the WAL into the database and, with
synchronous=NORMAL, two fsyncs (amortised, about a third of a durable record's
cost). Here no writer's connection checkpoints (`wal_autocheckpoint = 0`, set by
`sqlite_conn.connect_rw`); this thread does, PASSIVE (it never blocks a writer or a
reader), after every `CHECKPOINT_WRITES` op writes and at least every
`IDLE_SECONDS`, so the WAL stays small (a restart replays little of it) without a
request waiting for it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path

CHECKPOINT_WRITES = 2000
IDLE_SECONDS = 1.0


class Checkpointer:
    """`wrote()` after each committed write; `close()` checkpoints once more and stops."""

    def __init__(self, path: Path, fsync: bool) -> None:
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        self._db.execute(f"PRAGMA synchronous = {'FULL' if fsync else 'NORMAL'}")
        self._wake = threading.Event()
        self._stopping = False
        self._writes = 0  # since the last checkpoint (approximate: no lock needed)
        self._thread = threading.Thread(target=self._run, name="ml-wal-checkpoint", daemon=True)
        self._thread.start()

    def wrote(self) -> None:
        self._writes += 1
        if self._writes >= CHECKPOINT_WRITES:
            self._wake.set()

    def checkpoint(self) -> None:
        self._writes = 0
        with contextlib.suppress(sqlite3.Error):  # busy or closed: the next round
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(IDLE_SECONDS)
            self._wake.clear()
            if not self._stopping:
                self.checkpoint()

    def close(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=30)
        self.checkpoint()
        self._db.close()

"""The embedded store's read-write SQLite connection (WAL settings) and its
transaction: shared by the op log (`persistence`) and the kept decisions
(`decision_table`), grants and proposals, which write the same file on connections
of their own (`open_table`)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path


def connect_rw(path: Path, fsync: bool) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    db.execute(f"PRAGMA synchronous = {'FULL' if fsync else 'NORMAL'}")
    # No writer checkpoints (copies the WAL into the database, with NORMAL: two
    # fsyncs) inside its commit: `checkpointer.Checkpointer` does, on a thread of its
    # own. The WAL file is cut back to 64 MiB after a checkpoint.
    db.execute("PRAGMA wal_autocheckpoint = 0")
    db.execute("PRAGMA journal_size_limit = 67108864")
    return db


def open_table(
    path: Path | None, fsync: bool, schema: tuple[str, ...]
) -> sqlite3.Connection | None:
    """A connection of its own to the store's file with `schema` created (the side
    tables: grants, proposals); None without a file (a store in memory)."""
    if path is None:
        return None
    db = connect_rw(path, fsync)
    with transaction(db):
        for statement in schema:
            db.execute(statement)
    return db


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")

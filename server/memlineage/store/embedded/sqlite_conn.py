"""The embedded store's read-write SQLite connection (WAL settings) and its
transaction: shared by the op log (`persistence`) and the kept decisions
(`decision_table`), grants and proposals, which write the same file on connections
of their own (`open_table`)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from memlineage.lineage.errors import StoreCorruptError, StoreUnavailableError

_T = TypeVar("_T")


def connect_rw(path: Path, fsync: bool) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    db.execute(f"PRAGMA synchronous = {'FULL' if fsync else 'NORMAL'}")
    # No writer checkpoints (copies the WAL into the database, with NORMAL: two
    # fsyncs) inside its commit: `checkpointer.Checkpointer` does, on a thread of its
    # own. The WAL file is cut back to 64 MiB after a checkpoint.
    db.execute("PRAGMA wal_autocheckpoint = 0")
    db.execute("PRAGMA journal_size_limit = 67108864")
    return db


def connect_ro(path: Path) -> sqlite3.Connection:
    """A read-only connection (autocommit: a read transaction is begun by hand). On a
    read-only file system, a database without a write-ahead log is opened
    ``immutable`` (no -shm file to make; nothing can be writing it), so `store check`
    reads a cleanly stopped store there instead of failing to open it."""
    db = _ro(path, "")
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except sqlite3.Error as exc:
        if _not_opened(exc) and _read_only_fs(path) and not _has_wal(path):
            db.close()
            return _ro(path, "&immutable=1")
    return db


def _ro(path: Path, extra: str) -> sqlite3.Connection:
    db = sqlite3.connect(
        f"{path.resolve().as_uri()}?mode=ro{extra}",
        uri=True,
        isolation_level=None,
        check_same_thread=False,
        timeout=30,
    )
    db.execute("PRAGMA query_only = ON")
    return db


_NOT_OPENED = frozenset({sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM})


def _not_opened(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _NOT_OPENED


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _has_wal(path: Path) -> bool:
    try:
        return Path(f"{path}-wal").stat().st_size > 0
    except OSError:
        return False


def cannot_open(path: Path, exc: sqlite3.Error) -> StoreUnavailableError | None:
    """``StoreUnavailableError`` when `exc` is SQLite failing to open or read the file
    for its permissions or a read-only file system (not damage: before, it was
    reported as corruption, with advice to move the store away; an outside audit);
    None for any other error."""
    if not _not_opened(exc):
        return None
    name, where = path.name, path.parent
    if _read_only_fs(path):
        why = (
            f"its file system is read-only, and SQLite must make {name}-shm beside its "
            f"write-ahead log {name}-wal to read it; check a copy, or mount it read-write"
        )
    elif not os.access(where, os.W_OK | os.X_OK):
        why = f"permission denied: SQLite must make {name}-shm in {where}, which this user cannot"
    elif not os.access(path, os.R_OK):
        why = "permission denied: this user cannot read it"
    else:
        why = "SQLite cannot open it"
    return StoreUnavailableError(
        f"embedded store {path} cannot be opened: {why} ({exc}); this is not damage, "
        "and nothing was read or changed"
    )


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


def open_loaded(
    path: Path | None,
    fsync: bool,
    schema: tuple[str, ...],
    table: str,
    query: str,
    decode: Callable[..., _T],
) -> tuple[sqlite3.Connection | None, list[_T]]:
    """`open_table`, then every row of `query` through `decode` (called with the file
    and the row's columns; it raises ``StoreCorruptError`` for a damaged row): the
    side table opened and loaded, or nothing left open."""
    db = open_table(path, fsync, schema)
    if db is None or path is None:
        return db, []
    try:
        try:
            rows: list[Any] = db.execute(query).fetchall()
        except sqlite3.Error as exc:
            raise StoreCorruptError(path, f"the {table} table cannot be read ({exc})") from exc
        return db, [decode(path, *row) for row in rows]
    except BaseException:
        db.close()
        raise


def write_refused(path: Path | None, exc: sqlite3.Error) -> str:
    """Why SQLite refused a write to the store at `path` (None: one in memory), for its
    error message: a full file system (SQLITE_FULL) is named as such, with what it left
    (before: SQLite's "database or disk is full" alone)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if path is None or code is None or code & 0xFF != sqlite3.SQLITE_FULL:
        return str(exc)
    return (
        f"no room left on the file system of {path.parent} ({exc}); nothing of it was "
        "kept, and it can be tried again once space is freed, no restart needed"
    )


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        # SQLite rolls a transaction back itself on some errors (SQLITE_FULL: a full
        # disk); a ROLLBACK then raised "no transaction is active" over the reason
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")

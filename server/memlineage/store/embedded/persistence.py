"""Everything the embedded store keeps on disk, behind one class: ``SqliteLog``.

The data directory holds one SQLite database, ``lineage.sqlite3`` (WAL mode, the
standard library's ``sqlite3``).  It keeps the store's *op log*: every mutation is
one op dict (``EmbeddedStore`` builds it, ``State.apply`` applies it), inserted and
committed in its own transaction *before* it is applied (write-ahead), so a write
the caller saw acknowledged is in the database.  Replaying the ops re-runs the same
deterministic apply functions, which also regenerate the lineage events with their
cursors.

Why an op log and not the rows as tables: one op is one small insert whatever it
does (a cascade over 100,000 descendants, an access flush over 1,000 memories), and
the in-memory structures the engine reads (``State``/``Space``/``Row``) stay the
only implementation of what an op means.  To bound replay at restart, ``compact``
writes a *snapshot* of the whole state (rows column-wise in chunks, plus each
namespace's claims, counters, source statistics, review schedule, retained events
and event sequence) and deletes the ops it covers, all in one transaction: the
database is never between the two.  The server calls ``maybe_compact`` with
``compact_log_bytes`` after every access flush.

Tables: ``meta`` (format), ``ops(seq, op, crc)``, ``snapshot(part, data, crc)``,
and the kept decisions (``DecisionTable``, on a connection of its own: ``decisions``
and ``decision_memories``, created when missing; not part of the op log, the snapshot
or the checks: a decision is what the sidecar answered, not lineage state).
``crc`` is the CRC-32 of the JSON text seeded with its ``seq`` / ``part``, so a
changed byte, a hand-edited value or a row moved to another position is detected.

Opening an existing database is read-only until everything checked out: a
read-only connection runs ``PRAGMA quick_check``, verifies every checksum and that
the op numbers are contiguous, decodes every JSON text and replays it (an op that
cannot apply, e.g. a dependency that does not exist, is corruption).  Any problem
raises ``StoreCorruptError`` naming the file and the problem; nothing is written,
truncated or dropped (the file is byte-for-byte as it was).  ``check`` runs the
same load on its own; ``backup`` copies a live database (``sqlite3`` online
backup: one read transaction, writers keep going).

Durability, the ``fsync`` setting (``synchronous`` of SQLite in WAL mode):

* ``fsync=False`` → ``synchronous=NORMAL``: a commit writes the WAL without
  fsync.  Every acknowledged write survives a killed process (SIGKILL, OOM, a
  crash of the server): it is in the WAL file, in the OS's page cache.  A power
  loss or an OS crash may lose the writes of the last moments (those not yet
  synced at a checkpoint), never the database's integrity.
* ``fsync=True`` → ``synchronous=FULL``: the WAL is fsynced at every commit: an
  acknowledged write also survives a power loss (as far as the disk honours
  fsync), at the price of one fsync per write.

A data directory in the old format (``log.<gen>.jsonl`` / ``snapshot.json``, see
``legacy``) is imported once: loaded strictly, written as a snapshot into a new
database, then the old files are renamed ``*.imported`` (never deleted).

The store calls only ``open`` / ``append`` / ``size`` / ``compact`` / ``close``,
always under its lock; ``check`` and ``backup`` need no store.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from memlineage.lineage.errors import StoreUnavailableError
from memlineage.lineage.validation import StoreLimits
from memlineage.store.embedded import legacy
from memlineage.store.embedded.checkpointer import Checkpointer
from memlineage.store.embedded.codec import StoreCorruptError
from memlineage.store.embedded.decision_table import DecisionTable
from memlineage.store.embedded.dir_lock import DirLock
from memlineage.store.embedded.event_log import Wakeups
from memlineage.store.embedded.op_head import (
    HEAD_NAME,
    Head,
    OpHead,
    check_identity,
    check_missing,
)
from memlineage.store.embedded.reading import FREEZE_ROWS, read_store, stray_log
from memlineage.store.embedded.snapshot_parts import FORMAT, crc, dumps, write_snapshot
from memlineage.store.embedded.sqlite_conn import (
    connect_ro,
    connect_rw,
    transaction,
    write_refused,
)
from memlineage.store.embedded.state import State
from memlineage.store.embedded.summary import Summary

__all__ = [
    "DB_NAME",
    "FREEZE_ROWS",
    "DecisionTable",
    "SqliteLog",
    "StoreCorruptError",
    "Summary",
    "backup",
    "check",
]

DB_NAME = "lineage.sqlite3"

log = logging.getLogger("memlineage.store")
REFUSED_EVERY = 60.0  # seconds between two log lines of refused writes


def _not_a_directory(directory: Path) -> OSError:
    """Why `directory`, which exists as a name, is no data directory: a symlink loop's
    reason, or that it is a file (before: mkdir's "File exists", and `store check` read
    a file's path as a damaged store: STORE_CORRUPT, "restore it from a backup")."""
    try:
        os.stat(directory)
    except OSError as exc:
        return OSError(exc.errno, exc.strerror, str(directory))
    return NotADirectoryError(
        errno.ENOTDIR, f"not a directory (a data directory holds {DB_NAME})", str(directory)
    )


def make_data_dir(directory: Path) -> None:
    """Create the data directory (and its parents) unless it is one already."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise _not_a_directory(directory) from None


def _existing_dir(directory: Path) -> None:
    """Refuse a path that is there but is no directory; a missing one is let through
    (said as "no embedded store in DIR")."""
    if os.path.lexists(directory) and not directory.is_dir():
        raise _not_a_directory(directory)


_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE ops (seq INTEGER PRIMARY KEY, op TEXT NOT NULL, crc INTEGER NOT NULL)",
    "CREATE TABLE snapshot (part INTEGER PRIMARY KEY, data TEXT NOT NULL, crc INTEGER NOT NULL)",
)
_INSERT_OP = "INSERT INTO ops (seq, op, crc) VALUES (?, ?, ?)"


def _summary(path: Path, state: State, snap: int, last: int, n: int) -> Summary:
    spaces = [sp for sp in state.spaces.values() if sp.rows]
    return Summary(
        path=str(path),
        records=sum(len(sp.rows) for sp in spaces),
        namespaces=len(spaces),
        ops=n,
        snapshot_seq=snap,
        last_seq=last,
        events=sum(len(sp.events) for sp in state.spaces.values()),
        bytes=path.stat().st_size,
    )


def check(directory: str | os.PathLike[str], limits: StoreLimits | None = None) -> Summary:
    """Check the data directory's database read-only, as an open would: raises
    ``StoreCorruptError`` (or ``FileNotFoundError`` when there is none)."""
    _existing_dir(Path(directory))
    path = Path(directory) / DB_NAME
    changed = Wakeups(threading.RLock())
    state = State(limits or StoreLimits(), changed)
    stray_log(path)
    if not path.exists():
        check_missing(path, OpHead(Path(directory)).read(path))
        old = legacy.legacy_files(Path(directory))
        if old:
            with changed:
                n = legacy.load_legacy(Path(directory), state)
            spaces = [sp for sp in state.spaces.values() if sp.rows]
            return Summary(
                path=", ".join(str(p) for p in old),
                records=sum(len(sp.rows) for sp in spaces),
                namespaces=len(spaces),
                ops=n,
                snapshot_seq=0,
                last_seq=n,
                events=sum(len(sp.events) for sp in state.spaces.values()),
                bytes=sum(p.stat().st_size for p in old),
            )
        raise FileNotFoundError(f"no embedded store in {directory} (no {DB_NAME})")
    head = OpHead(Path(directory))
    kept = head.read(path)  # first: a live writer never puts it past what is read next
    check_identity(path, kept, _store_id(path))
    with changed:
        snap, last, n, _ = read_store(path, state)
    head.check(path, last, kept)
    from memlineage.store.embedded.grant_table import check_grants
    from memlineage.store.embedded.proposal_table import check_proposals

    summary = _summary(path, state, snap, last, n)
    return replace(summary, grants=check_grants(path, kept), proposals=check_proposals(path, kept))


def backup(directory: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Summary:
    """Copy the data directory's database into the directory ``dest`` (created; it
    must hold no store yet) with SQLite's online backup: one read transaction, so
    the copy is consistent while a server keeps writing.  Returns the copy's check."""
    _existing_dir(Path(directory))
    source = Path(directory) / DB_NAME
    if not source.exists():
        raise FileNotFoundError(f"no embedded store in {directory} (no {DB_NAME})")
    out = Path(dest)
    make_data_dir(out)
    target = out / DB_NAME
    if target.exists():
        raise FileExistsError(f"{target} exists: back up into a new directory")
    head = out / HEAD_NAME
    if head.exists():  # another store's record: the copy would be checked against it
        raise FileExistsError(f"{head} exists (another store's): back up into a new directory")
    partial = out / f"{DB_NAME}.partial"
    partial.unlink(missing_ok=True)
    src = connect_ro(source)
    try:
        dst = sqlite3.connect(partial, isolation_level=None)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode = WAL")
        finally:
            dst.close()
    finally:
        src.close()
    os.replace(partial, target)
    _sync_dir(out)
    return check(out)


def _sync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform can open a directory
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _store_id(path: Path) -> str | None:
    """The database's identity (``meta``; None before it had one); a database that
    cannot be read this far is said by the strict read that follows."""
    try:
        db = connect_ro(path)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'store'").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return row[0] if row is not None and isinstance(row[0], str) else None


# -- writing ------------------------------------------------------------------------------


def _create(path: Path, fsync: bool) -> sqlite3.Connection:
    db = connect_rw(path, fsync)
    db.execute("PRAGMA journal_mode = WAL")
    with transaction(db):
        for statement in _SCHEMA:
            db.execute(statement)
        db.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
        db.execute("INSERT INTO meta VALUES ('store', ?)", (uuid.uuid4().hex,))
    return db


FOLD_WAIT_FIRST = 5.0
FOLD_WAIT_MOST = 300.0
"""Seconds the periodic fold waits after a refused one, doubling to the most; a fold
that goes through starts the wait over."""


class SqliteLog:
    """The write-ahead op log and snapshot of one data directory, in SQLite."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self._dir = Path(directory)
        self.path = self._dir / DB_NAME
        self._fsync = fsync
        self._db: sqlite3.Connection | None = None
        self._seq = 0  # the last op written
        self._bytes = 0  # op text written since the snapshot
        self._refused_at: float | None = None  # when a refused write was last logged
        self._refusals = 0  # refused writes since then
        self._said_refused = False  # a refusal was logged, and no write since
        self._fold_wait = FOLD_WAIT_FIRST  # after the next refused fold (`fold_due`)
        self._fold_again_at = 0.0  # monotonic time before which no fold is due
        self.decisions: DecisionTable | None = None  # opened by `open`
        self._checkpointer: Checkpointer | None = None  # started by `open`
        self._lock = DirLock(self._dir)
        self.head = OpHead(self._dir)
        self.kept: Head | None = None  # what the head record said at open (`_open`)

    def open(self, state: State) -> None:
        """Lock the directory, check and load the database into ``state`` (empty),
        read-only, then open it for writing; a directory without one gets a new
        database (importing the old JSON-lines files when there are some).  Raises
        ``StoreCorruptError``, or ``StoreUnavailableError`` when another store holds
        the directory."""
        make_data_dir(self._dir)
        self._lock.acquire()
        try:
            self._open(state)
        except BaseException:
            self.close()
            raise

    def _open(self, state: State) -> None:
        stray_log(self.path)
        if self.path.exists():
            self.kept = kept = self.head.read(self.path)
            store = _store_id(self.path)
            check_identity(self.path, kept, store)
            _, self._seq, _, self._bytes = read_store(self.path, state)
            self.head.check(self.path, self._seq, kept)
            self._db = connect_rw(self.path, self._fsync)
            self.head.watching(self.path)
            self._checkpointer = Checkpointer(self.path, self._fsync)
            with transaction(self._db):  # format 1 is read as 2: from now on it is 2
                self._db.execute(
                    "UPDATE meta SET value = ? WHERE key = 'format' AND value != ?",
                    (FORMAT, FORMAT),
                )
                if store is None:  # a database from before identities is given one
                    store = uuid.uuid4().hex
                    self._db.execute("INSERT INTO meta VALUES ('store', ?)", (store,))
            self.head.identify(store)
            self._finish_import()
            self.decisions = DecisionTable(self.path, self._fsync, self.head)
            return
        check_missing(self.path, self.head.read(self.path))
        old = legacy.legacy_files(self._dir)
        partial = self._dir / f"{DB_NAME}.partial"
        for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
            leftover.unlink(missing_ok=True)  # a create or import that did not finish
        if old:
            legacy.load_legacy(self._dir, state)  # strict: raises before anything is written
        db = _create(partial, True)
        try:
            if old:
                write_snapshot(db, state, 0)
                db.execute(
                    "INSERT INTO meta VALUES ('imported', ?)", (dumps([p.name for p in old]),)
                )
        finally:
            db.close()
        os.replace(partial, self.path)
        _sync_dir(self._dir)
        for p in old:  # kept, renamed: the database is the store from now on
            os.replace(p, p.with_name(p.name + ".imported"))
        self._db = connect_rw(self.path, self._fsync)
        self.head.watching(self.path)
        made = self._db.execute("SELECT value FROM meta WHERE key = 'store'").fetchone()
        self.head.identify(str(made[0]))
        self._checkpointer = Checkpointer(self.path, self._fsync)
        self.decisions = DecisionTable(self.path, self._fsync, self.head)

    def there(self) -> bool:
        """Whether the database opened is still at its path (`file_watch`)."""
        return self.head.watch is None or self.head.watch.there()

    def synced_commits(self) -> bool:
        """Whether the open database fsyncs at every commit (``PRAGMA synchronous``
        asked of the live connection: FULL or stronger)."""
        assert self._db is not None
        return int(self._db.execute("PRAGMA synchronous").fetchone()[0]) >= 2

    def _finish_import(self) -> None:
        """Rename the old files an import read, when a crash came between the new
        database and their renaming (the database lists them)."""
        assert self._db is not None
        row = self._db.execute("SELECT value FROM meta WHERE key = 'imported'").fetchone()
        if row is None:
            return
        names = set(json.loads(row[0]))
        for p in legacy.legacy_files(self._dir):
            if p.name in names:
                os.replace(p, p.with_name(p.name + ".imported"))

    def append(self, op: dict[str, Any]) -> None:
        """Write-ahead: the op is committed (its own transaction) before the store
        applies it.  Nothing is written once the log is closed."""
        db = self._db
        if db is None:
            return
        watch = self.head.watch
        if watch is not None and watch.gone:
            watch.check()  # refused without writing into the file no longer there
        text = dumps(op)
        seq = self._seq + 1
        try:
            db.execute(_INSERT_OP, (seq, text, crc(seq, text)))
        except sqlite3.IntegrityError as exc:
            raise StoreUnavailableError(
                f"embedded store {self.path}: op {seq} was written by another process; "
                "one data directory serves one store"
            ) from exc
        except sqlite3.Error as exc:
            why = write_refused(self.path, exc)
            self._refused(why)
            raise StoreUnavailableError(
                f"embedded store {self.path}: the write failed ({why})"
            ) from exc
        if self._said_refused:
            log.warning("embedded store %s: writes go through again", self.path)
            self._said_refused = False
        self._seq = seq
        self._bytes += len(text)
        self.head.committed(seq)
        if self._checkpointer is not None:
            self._checkpointer.wrote()

    def _refused(self, why: str) -> None:
        """Log a refused write: once, then at most once a minute with the count. Near a
        full disk a small write may fit where a larger one did not (SQLite reuses the
        room a refused commit took), so refusals and writes can alternate: one line
        each per minute, not one per write."""
        now = time.monotonic()
        if self._refused_at is not None and now - self._refused_at < REFUSED_EVERY:
            self._refusals += 1
            return
        more = f" ({self._refusals} more refused since the last report)" if self._refusals else ""
        log.error("embedded store %s: writes are refused%s: %s", self.path, more, why)
        self._refused_at, self._refusals, self._said_refused = now, 0, True

    def size(self) -> int | None:
        """Bytes of op text written since the snapshot; None once closed."""
        return None if self._db is None else self._bytes

    def fold_due(self) -> bool:
        """Whether the periodic fold may try now: not within its wait after a refused
        one (`FOLD_WAIT_FIRST`, doubling to `FOLD_WAIT_MOST`). A fold writes the whole
        state under the store's lock, so on a disk without room for it every flush
        stalled every request for as long, only to be refused again."""
        return time.monotonic() >= self._fold_again_at

    def compact(self, state: State) -> None:
        """Snapshot the whole state, replacing the ops it covers (one transaction),
        then checkpoint the WAL into the database."""
        db = self._db
        if db is None:
            return
        try:
            write_snapshot(db, state, self._seq)
        except sqlite3.Error as exc:  # before: sqlite3's own error, a traceback per flush
            wait = self._fold_wait
            self._fold_again_at = time.monotonic() + wait
            self._fold_wait = min(FOLD_WAIT_MOST, wait * 2)
            raise StoreUnavailableError(
                f"embedded store {self.path}: folding the op log into a snapshot failed "
                f"({write_refused(self.path, exc)}); the ops stay in the log, and the fold "
                f"is tried again in {wait:g} s"
            ) from exc
        self._bytes = 0
        self._fold_wait, self._fold_again_at = FOLD_WAIT_FIRST, 0.0
        with contextlib.suppress(sqlite3.OperationalError):  # a reader holds it: later
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        if self.decisions is not None:
            self.decisions.close()
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
        if self._db is not None:
            self._db.close()
            self._db = None
            self.head.write(self._seq)  # the last op, now in the database itself
        self._lock.release()

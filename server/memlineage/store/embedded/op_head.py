"""The embedded store's head record: the last op it committed, kept beside the
database in ``lineage.head`` (at most a second behind, and at close), so that ops
lost from the end of the write-ahead log while the store was down show at open.

SQLite drops a cut or damaged tail of its write-ahead log without a word (a log
torn by a power loss looks the same), and a removed log takes every op not yet
checkpointed with it: the store then opened on what was left, and acknowledged
writes were gone (an outside audit). Now an open, and `memlineage store check`,
refuse a database that ends before its head record. The record is written after
the commit it names (a killed process never leaves it ahead); after a power loss
with ``fsync`` off, which may lose the last moments of the log, it can be ahead:
the refusal says to remove it to start from what is there.

The record also names the database it was written for (``store``: a random id kept
in the database's ``meta`` table, `check_identity`), and holds how many writes each
side table (grants, proposals) has committed (`side_committed`; `table_tally` keeps
the count in the database, in the same transaction as the rows): a cut log that
loses a spent grant use would otherwise give the use back without a word."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from memlineage.oserrors import reason
from memlineage.store.embedded.codec import StoreCorruptError
from memlineage.store.embedded.file_watch import FileWatch

log = logging.getLogger("memlineage.store")

HEAD_NAME = "lineage.head"
HEAD_EVERY = 1.0  # seconds between two writes of the record while writing


def _crc(seq: int, tables: dict[str, int] | None = None, store: str | None = None) -> int:
    """The record's checksum (one written before side tables were counted: no
    `tables`; before stores had an identity: no `store`)."""
    text = f"head:{seq}" if tables is None else f"head:{seq}:{json.dumps(tables, sort_keys=True)}"
    if store is not None:
        text += f":{store}"
    return zlib.crc32(text.encode())


@dataclass(frozen=True)
class Head:
    """What a head record says: the last op committed, and each side table's
    committed writes (a table it does not name: none counted yet)."""

    seq: int
    tables: dict[str, int] = field(default_factory=dict)
    store: str | None = None  # the identity of the database it was written for


class OpHead:
    """The head record of one data directory (written from the op log's writer and
    from the side tables' own connections: under a lock of its own)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / HEAD_NAME
        self._lock = threading.Lock()
        self._seq = 0
        self._tables: dict[str, int] = {}
        self._store: str | None = None
        self._written: Head | None = None
        self._at = 0.0
        self._failing = False  # the last write failed (and said so)
        self.watch: FileWatch | None = None  # the database, once opened (`watching`)

    def watching(self, database: Path) -> None:
        """From now on, every commit told here first checks that `database` is still
        the file opened (`file_watch`): StoreUnavailableError once it is not."""
        watch = FileWatch(database)
        watch.opened()
        self.watch = watch

    def committed(self, seq: int) -> None:
        """After op `seq` was committed: write the record when a second has passed."""
        with self._lock:
            self._seq = seq
            if self.watch is not None:
                self.watch.check()
            if time.monotonic() - self._at >= HEAD_EVERY:
                self._write()

    def side_committed(self, table: str, writes: int) -> None:
        """After side table `table`'s write number `writes` was committed (as
        `committed`)."""
        with self._lock:
            self._tables[table] = writes
            if self.watch is not None:
                self.watch.check()
            if time.monotonic() - self._at >= HEAD_EVERY:
                self._write()

    def still_there(self) -> None:
        """StoreUnavailableError once the database is no longer the file opened
        (`file_watch`), for a writer whose commits the record does not count (the kept
        decisions): as `committed`, under the same lock (the log says it once)."""
        with self._lock:
            if self.watch is not None:
                self.watch.check()

    def write(self, seq: int) -> None:
        """Write the record now, op `seq` the last committed (at close); not once the
        database is gone from its path (a directory made again there is not this
        store's)."""
        with self._lock:
            self._seq = seq
            if self.watch is None or self.watch.there():
                self._write()

    def _write(self) -> None:
        """Replace the record (a temporary file renamed over it: whole or not at all);
        a failure is not the write's: the next one tries again."""
        now = Head(self._seq, dict(self._tables), self._store)
        if now == self._written:
            return
        self._at = time.monotonic()
        partial = self.path.with_name(f"{HEAD_NAME}.{os.getpid()}.tmp")
        record: dict[str, object] = {"seq": now.seq, "tables": now.tables}
        if now.store is not None:
            record["store"] = now.store
        record["crc"] = _crc(now.seq, now.tables, now.store)
        try:
            partial.write_text(json.dumps(record, sort_keys=True) + "\n")
            os.replace(partial, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):  # not one 0-byte file left per failure
                partial.unlink(missing_ok=True)
            # said once per run of failures: the check at open is weaker meanwhile
            if not self._failing:
                log.warning(
                    "embedded store: its head record %s cannot be written (%s); ops "
                    "lost from a cut write-ahead log are not found at the next open "
                    "until it can",
                    self.path,
                    reason(exc),
                )
            self._failing = True
            return
        if self._failing:
            log.warning("embedded store: its head record %s is written again", self.path)
        self._failing = False
        self._written = now

    def read(self, database: Path) -> Head | None:
        """What the record names (None: there is none); a record that does not read
        back as written is ``StoreCorruptError``. Read it before the database: it is
        written after its commit, so a writer going on meanwhile never puts it ahead."""
        try:
            raw = self.path.read_bytes()[:4096]
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreCorruptError(
                database, f"its head record {HEAD_NAME} cannot be read ({reason(exc)})"
            ) from None
        try:
            head = _decoded(json.loads(raw))
        except (ValueError, RecursionError):
            head = None
        if head is not None:
            return head
        raise StoreCorruptError(
            database, f"its head record {HEAD_NAME} was altered; restore it, or {_REMEDY}"
        )

    def check(self, database: Path, last: int, kept: Head | None) -> None:
        """Refuse (``StoreCorruptError``) a database whose last op is before `kept`'s,
        the record read (`read`) before the database was; else go on from `kept`."""
        if kept is None:
            return
        if kept.seq > last:
            raise _lost(database, f"ends at op {last:,}", f"op {kept.seq:,} was committed")
        with self._lock:
            self._seq, self._tables = last, dict(kept.tables)
            self._written = Head(last, dict(kept.tables), kept.store) if last == kept.seq else None

    def identify(self, store: str) -> None:
        """The identity of the database opened (`check_identity`), written into the
        record from now on."""
        with self._lock:
            self._store = store


def check_identity(database: Path, kept: Head | None, store: str | None) -> None:
    """Refuse (``StoreCorruptError``) a database whose identity `store` (``meta``) is
    not the one the head record `kept` was written for: another store's database
    copied into this directory was served, its counts being all the record held (an
    outside audit). A database or a record from before identities is not compared."""
    if kept is None or kept.store is None or store is None or kept.store == store:
        return
    raise StoreCorruptError(
        database,
        f"is another store's database (store {store}), not the one its head record "
        f"{HEAD_NAME} was written for (store {kept.store}): copied or restored from "
        "another data directory; put this directory's own database back, or, to serve "
        f"this one on purpose, {_REMEDY}",
        remedy="nothing on disk was changed",
    )


def check_missing(database: Path, kept: Head | None) -> None:
    """Refuse (``StoreCorruptError``) a directory whose database is missing while its
    head record `kept` says writes were committed: before, an open created an empty
    database and rewrote the record to op 0, and `store check` then said ok (an
    outside audit: the acknowledged writes were gone without a word)."""
    if kept is None:
        return
    said = [f"op {kept.seq:,}"] if kept.seq else []
    said += [f"{n:,} writes of its {t} table" for t, n in sorted(kept.tables.items()) if n]
    if not said:
        return
    raise StoreCorruptError(
        database,
        f"is missing, but its head record {HEAD_NAME} says {' and '.join(said)} were "
        "committed: the database was moved or deleted; put it back (with its -wal file, "
        f"or from a backup), or remove {HEAD_NAME} to start an empty store",
        remedy="nothing on disk was changed",
    )


def check_table(database: Path, table: str, writes: int, kept: Head | None) -> None:
    """Refuse (``StoreCorruptError``) side table `table` when the database holds fewer
    of its writes (`writes`) than `kept`, the head record read before the table was."""
    said = kept.tables.get(table, 0) if kept is not None else 0
    if said > writes:
        raise _lost(
            database,
            f"holds {writes:,} writes of its {table} table",
            f"{said:,} were committed",
        )


def _lost(database: Path, holds: str, said: str) -> StoreCorruptError:
    return StoreCorruptError(
        database,
        f"{holds}, but its head record {HEAD_NAME} says {said}: the write-ahead log "
        f"({database.name}-wal) was cut, damaged or removed, and acknowledged writes are "
        "lost; restore the directory from a backup, or (after a power loss with fsync "
        f"off, or a restore on purpose) {_REMEDY}",
        # its own advice: not the generic "restore the file from a backup, or move it
        # away", which read as a contradiction after a restore on purpose (a review)
        remedy="nothing on disk was changed",
    )


def _decoded(v: object) -> Head | None:
    """A head record's JSON as `_write` (or, without ``tables``, an older version)
    wrote it; None when it is not."""
    if not isinstance(v, dict) or type(v.get("seq")) is not int:
        return None
    seq, tables = v["seq"], v.get("tables")
    if tables is None:
        return Head(seq) if v.get("crc") == _crc(seq) else None
    if not isinstance(tables, dict) or not all(
        isinstance(k, str) and type(n) is int for k, n in tables.items()
    ):
        return None
    store = v.get("store")
    if store is not None and not isinstance(store, str):
        return None
    return Head(seq, dict(tables), store) if v.get("crc") == _crc(seq, tables, store) else None


_REMEDY = f"remove {HEAD_NAME} to start from what is there"

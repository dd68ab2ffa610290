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
the refusal says to remove it to start from what is there."""

from __future__ import annotations

import json
import os
import time
import zlib
from pathlib import Path

from memlineage.oserrors import reason
from memlineage.store.embedded.codec import StoreCorruptError

HEAD_NAME = "lineage.head"
HEAD_EVERY = 1.0  # seconds between two writes of the record while writing


def _crc(seq: int) -> int:
    return zlib.crc32(f"head:{seq}".encode())


class OpHead:
    """The head record of one data directory."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / HEAD_NAME
        self._written = -1
        self._at = 0.0

    def committed(self, seq: int) -> None:
        """After op `seq` was committed: write the record when a second has passed."""
        if time.monotonic() - self._at >= HEAD_EVERY:
            self.write(seq)

    def write(self, seq: int) -> None:
        """Replace the record (a temporary file renamed over it: whole or not at all);
        a failure is not the write's: the next one tries again."""
        if seq == self._written:
            return
        self._at = time.monotonic()
        partial = self.path.with_name(f"{HEAD_NAME}.{os.getpid()}.tmp")
        try:
            partial.write_text(json.dumps({"seq": seq, "crc": _crc(seq)}) + "\n")
            os.replace(partial, self.path)
        except OSError:
            return
        self._written = seq

    def read(self, database: Path) -> int | None:
        """The op the record names (None: there is none); a record that does not read
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
            v = json.loads(raw)
            if isinstance(v, dict) and type(v.get("seq")) is int and v.get("crc") == _crc(v["seq"]):
                return int(v["seq"])
        except (ValueError, RecursionError):
            pass
        raise StoreCorruptError(
            database, f"its head record {HEAD_NAME} was altered; restore it, or {_REMEDY}"
        )

    def check(self, database: Path, last: int, kept: int | None) -> None:
        """Refuse (``StoreCorruptError``) a database whose last op is before `kept`,
        the record read (`read`) before the database was."""
        if kept is None:
            return
        if kept > last:
            raise StoreCorruptError(
                database,
                f"ends at op {last:,}, but its head record {HEAD_NAME} says op {kept:,} was "
                f"committed: the write-ahead log ({database.name}-wal) was cut, damaged or "
                "removed, and acknowledged writes are lost; restore the directory from a "
                f"backup, or (after a power loss with fsync off, or a restore on purpose) "
                f"{_REMEDY}",
            )
        self._written = kept


_REMEDY = f"remove {HEAD_NAME} to start from what is there"

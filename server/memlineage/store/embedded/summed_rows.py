"""Checksummed rows of the embedded store's side tables (grants, proposals): each
``(ns, key, data, crc)`` row holds the CRC-32 of its three texts, so a changed byte or
a hand-edited field is found at open (and by `memlineage store check`) instead of read
as state; a row written before its table had the column is given its checksum once,
and from then on (``meta`` says so: `mark_summed`) a row without one is damage too."""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path

from memlineage.store.embedded.codec import StoreCorruptError


def row_crc(ns: str, key: str, data: str) -> int:
    """The checksum of a side-table row (as the op log's)."""
    return zlib.crc32(f"{ns}\x1f{key}\x1f{data}".encode())


def check_row(
    path: Path,
    table: str,
    key_name: str,
    ns: object,
    key: object,
    data: object,
    crc: object,
    *,
    summed: bool = False,
) -> bool:
    """Whether the row carries a checksum (None: written before the column); a row
    whose checksum no longer holds, or (``summed``: every row has had one since) one
    without a checksum, is ``StoreCorruptError`` naming the file and row."""
    if crc is None and summed:
        raise StoreCorruptError(
            path,
            f"{table} row (ns {ns!r}, {key_name} {key!r}) has no checksum, which every "
            "row of the table has carried since it was given one (removed by hand)",
        )
    texts = isinstance(ns, str) and isinstance(key, str) and isinstance(data, str)
    if crc is not None and texts and crc != row_crc(str(ns), str(key), str(data)):
        raise StoreCorruptError(
            path,
            f"{table} row (ns {ns!r}, {key_name} {key!r}) fails its checksum "
            "(the stored text was changed after it was written)",
        )
    return crc is not None


def add_crc_column(path: Path, table: str) -> None:
    """Give `table`, made before the checksum, its ``crc`` column (once)."""
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
        if cols and "crc" not in cols:
            db.execute(f"ALTER TABLE {table} ADD COLUMN crc INTEGER")
    except sqlite3.Error as exc:
        raise StoreCorruptError(path, f"the {table} table cannot be read ({exc})") from exc
    finally:
        db.close()


def _marker(table: str) -> str:
    return f"summed:{table}"


def is_summed(path: Path, table: str) -> bool:
    """Whether ``meta`` says every row of `table` carries its checksum (read-only)."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        has_meta = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
        ).fetchone()
        return bool(has_meta) and is_summed_in(db, table)
    except sqlite3.Error as exc:
        raise StoreCorruptError(path, f"the meta table cannot be read ({exc})") from exc
    finally:
        db.close()


def is_summed_in(db: sqlite3.Connection, table: str) -> bool:
    """`is_summed` on an open connection whose database has a ``meta`` table."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (_marker(table),)).fetchone()
    return row is not None


def mark_summed(db: sqlite3.Connection, table: str) -> None:
    """Record in ``meta`` that every row of `table` carries its checksum now (once
    the rows written before the column were given theirs)."""
    db.execute("INSERT OR IGNORE INTO meta VALUES (?, '1')", (_marker(table),))

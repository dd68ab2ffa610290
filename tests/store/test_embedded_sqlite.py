"""The embedded store's SQLite database: write-ahead commits, the fsync setting, the
checks at open (checksums, contiguous ops, replay, SQLite's own), a refusal that
leaves the file untouched, one writer per directory, check / backup, and the
one-time import of the old JSON-lines format."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from memlineage.lineage import ManualClock, MemoryRecord, NotFoundError, StoreUnavailableError
from memlineage.store.embedded import EmbeddedStore, op_head, persistence
from memlineage.store.embedded.dir_lock import LOCK_NAME
from memlineage.store.embedded.op_head import HEAD_NAME
from memlineage.store.embedded.persistence import DB_NAME, StoreCorruptError
from support.grants import user_grant
from support.memories import NOW

NS = "tenant:sql"


def mem(memory_id: str, *deps: str, value: str | None = None) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        namespace=NS,
        creator_id="user:u",
        dependencies=deps,
        subject="trip" if value else None,
        attribute=memory_id if value else None,
        value=value,
    )


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ro(data: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{(data / DB_NAME).as_uri()}?mode=ro", uri=True)


def rw(data: Path) -> sqlite3.Connection:
    return sqlite3.connect(data / DB_NAME, isolation_level=None)


def ops(data: Path) -> list[tuple[int, str]]:
    con = ro(data)
    try:
        return con.execute("SELECT seq, op FROM ops ORDER BY seq").fetchall()
    finally:
        con.close()


def written(data: Path, n: int = 6, snapshot: bool = False) -> Path:
    store = EmbeddedStore(data, clock=ManualClock(NOW))
    store.record(mem("m0", value="Paris"))
    for i in range(1, n):
        store.record(mem(f"m{i}", f"m{i - 1}", value=f"Rome {i}"))
    if snapshot:
        store.compact()
        store.revoke(NS, "m0", reason="bad")
    store.close()
    return data


# -- writes ---------------------------------------------------------------------------------


def test_every_write_is_committed_before_it_is_applied(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    store.record(mem("a"))
    # Another connection sees the op at once: it is committed, not buffered.
    assert [json.loads(op)["r"]["id"] for _, op in ops(tmp_path)] == ["a"]
    # A write SQLite refuses is not applied, and the caller hears of it.
    assert store._log is not None and store._log._db is not None
    store._log._db.execute("PRAGMA query_only = ON")
    with pytest.raises(StoreUnavailableError, match="the write failed"):
        store.record(mem("b", "a"))
    with pytest.raises(NotFoundError):
        store.get(NS, "b")
    assert store.get(NS, "a").derivations == ()
    store._log._db.execute("PRAGMA query_only = OFF")
    store.record(mem("b", "a"))
    store.close()
    assert [seq for seq, _ in ops(tmp_path)] == [1, 2]
    again = EmbeddedStore(tmp_path)
    assert again.get(NS, "a").derivations == ("b",)
    again.close()


@pytest.mark.parametrize(("fsync", "level"), [(False, 1), (True, 2)], ids=["normal", "full"])
def test_fsync_maps_to_sqlite_synchronous(tmp_path: Path, fsync: bool, level: int) -> None:
    store = EmbeddedStore(tmp_path, fsync=fsync)
    assert store._log is not None and store._log._db is not None
    db = store._log._db
    assert db.execute("PRAGMA synchronous").fetchone()[0] == level  # NORMAL 1, FULL 2
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert ("power loss (fsync" in store.durability()) is fsync, store.durability()
    store.close()
    assert EmbeddedStore().durability().startswith("nothing: in memory only")


def test_an_access_flush_is_one_op_and_replays(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    store.record(mem("m1"))
    store.record(mem("m2"))
    store.record_accesses(NS, {"m1": (3, NOW + 10), "m2": (1, NOW + 5), "ghost": (1, NOW)})
    assert len(ops(tmp_path)) == 3
    store.close()
    again = EmbeddedStore(tmp_path)
    m1, m2 = again.get(NS, "m1"), again.get(NS, "m2")
    assert (m1.access_count, m1.last_access, m2.access_count) == (3, NOW + 10, 1)
    again.close()


def test_one_data_directory_has_one_writer(tmp_path: Path) -> None:
    """A second store on a directory another one holds refuses to open, naming the
    holder (before: it opened, served its own stale copy, and one of the two failed
    every write); once the first is closed it opens on everything the first wrote."""
    first = EmbeddedStore(tmp_path)
    first.record(mem("mine"))
    with pytest.raises(
        StoreUnavailableError, match=f"in use by another store \\(pid {os.getpid()}\\)"
    ):
        EmbeddedStore(tmp_path)
    first.record(mem("more"))  # the holder goes on writing
    first.close()
    second = EmbeddedStore(tmp_path)
    assert [second.get(NS, m).id for m in ("mine", "more")] == ["mine", "more"]
    second.close()


def test_a_removed_lock_file_does_not_let_a_second_store_in(tmp_path: Path) -> None:
    """The lock file removed while a store holds the directory: a second store still
    refuses to open (the directory itself is locked too); before, it locked a new
    file and served beside the first, spending grant uses twice (an outside audit).
    Once the first is closed, the directory opens again."""
    first = EmbeddedStore(tmp_path)
    first.record(mem("mine"))
    (tmp_path / LOCK_NAME).unlink()
    with pytest.raises(
        StoreUnavailableError, match="in use by another store \\(pid unknown: its lock file"
    ):
        EmbeddedStore(tmp_path)
    first.record(mem("more"))
    first.close()
    second = EmbeddedStore(tmp_path)
    assert (tmp_path / LOCK_NAME).read_text() == f"{os.getpid()}\n"
    assert [second.get(NS, m).id for m in ("mine", "more")] == ["mine", "more"]
    second.close()


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_writes_are_refused_once_the_database_is_gone_from_its_path(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The data directory removed (or replaced by a copy) while a store serves: the
    next write and every one after it is StoreUnavailableError naming the file, grant
    spends too, `ping` says False, the log says it once, and the close writes no head
    record there (before: SQLite wrote into the unlinked file, every write was
    acknowledged, and all was lost at the next start; an outside audit)."""
    data = tmp_path / "data"
    store = EmbeddedStore(data, clock=ManualClock(NOW))
    store.record(mem("before"))
    store.put_grant(user_grant(NS, "g", uses=5, memory_id="before"))
    if how == "removed":
        shutil.rmtree(data)
    else:
        shutil.copytree(data, tmp_path / "copy")
        shutil.rmtree(data)
        (tmp_path / "copy").rename(data)
    after = sorted(p.name for p in data.iterdir()) if data.exists() else None
    gone = f"embedded store {data / DB_NAME}: the database is no longer at its path"
    with caplog.at_level("ERROR", logger="memlineage.store"):
        for i in range(3):
            with pytest.raises(StoreUnavailableError, match=gone):
                store.record(mem(f"after{i}"))
        with pytest.raises(StoreUnavailableError, match=gone):
            store.use_grants(NS, ["g"])
        assert not store.ping()
    said = [r for r in caplog.records if "no longer the file it opened" in r.getMessage()]
    assert len(said) == 1
    with pytest.raises(NotFoundError):
        store.get(NS, "after0")
    store.close()
    assert (sorted(p.name for p in data.iterdir()) if data.exists() else None) == after


def test_a_refused_write_moves_no_write_counter(tmp_path: Path) -> None:
    """A write refused (here: the database gone from its path) leaves the counters
    that readers reuse what they derived by (`epochs`, `unchanged_since`) as they were:
    before, they moved ahead of the commit, so a refused rate count said the
    namespace's counters had changed, and one in a new namespace made it."""
    data = tmp_path / "data"
    store = EmbeddedStore(data, clock=ManualClock(NOW))
    store.record(mem("before"))
    store.incr_counter(NS, "tool:t")
    epochs, mark = store.epochs(NS), store.change_mark()
    shutil.rmtree(data)
    refused: list[Callable[[], object]] = [
        lambda: store.incr_counter(NS, "tool:t"),
        lambda: store.record_claim(mem("after"), count="tool:t"),
        lambda: store.record_access(NS, ["before"]),
        lambda: store.feedback(NS, ["before"], True),
    ]
    for write in refused:
        with pytest.raises(StoreUnavailableError):
            write()
    assert store.epochs(NS) == epochs
    assert store.unchanged_since(NS, ["before"], mark, access=True, counters=True)
    assert store.count(NS, "tool:t", 3600) == 1
    store.close()


def test_a_store_that_failed_to_open_leaves_the_directory_free(tmp_path: Path) -> None:
    EmbeddedStore(tmp_path).close()
    (tmp_path / "lineage.sqlite3").write_bytes(b"not a database")
    with pytest.raises(StoreCorruptError):
        EmbeddedStore(tmp_path)
    (tmp_path / "lineage.sqlite3").unlink()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"lineage.sqlite3{suffix}").unlink(missing_ok=True)
    EmbeddedStore(tmp_path).close()  # not held by the failed open


@pytest.mark.parametrize("damage", ["emptied", "removed"])
def test_a_write_ahead_log_without_its_database_is_refused_and_kept(
    tmp_path: Path, damage: str
) -> None:
    """A crash image (the database and its -wal, as a SIGKILL leaves them) whose
    database file was emptied or moved away: `check` and an open refuse before SQLite
    sees the log, and the log keeps its bytes (before: `check` deleted it, and an open
    replayed it into a new, malformed database: the acknowledged ops were lost)."""
    live, image = tmp_path / "live", tmp_path / "image"
    store = EmbeddedStore(live)
    for i in range(30):
        store.record(mem(f"m{i}"))
    image.mkdir()
    for name in (DB_NAME, f"{DB_NAME}-wal"):
        (image / name).write_bytes((live / name).read_bytes())
    store.close()
    wal = (image / f"{DB_NAME}-wal").read_bytes()
    assert wal, "the writes are in the log"
    saved = (image / DB_NAME).read_bytes()
    if damage == "emptied":
        (image / DB_NAME).write_bytes(b"")
    else:
        (image / DB_NAME).unlink()
    said = "is empty" if damage == "emptied" else "is missing"
    for attempt in (lambda: persistence.check(image), lambda: EmbeddedStore(image)):
        with pytest.raises(StoreCorruptError, match=f"{said}, but its write-ahead log"):
            attempt()
        assert (image / f"{DB_NAME}-wal").read_bytes() == wal
        assert (image / DB_NAME).exists() is (damage == "emptied")
    (image / DB_NAME).write_bytes(saved)  # the database put back: every op is there
    again = EmbeddedStore(image)
    assert len(again.get_many(NS, [f"m{i}" for i in range(30)])) == 30
    again.close()


def test_a_database_removed_while_its_head_record_stays_is_refused(tmp_path: Path) -> None:
    """A directory whose database (and -wal, -shm) was removed after a clean stop,
    its head record left: the open and `check` refuse, naming the file and what the
    record says was committed, and create nothing (before: an open made an empty
    database, rewrote the record to op 0, and `check` then said ok; an outside
    audit). Removing the record, as the refusal says, starts an empty store."""
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    for i in range(5):
        store.record(mem(f"m{i}"))
    store.put_grant(user_grant(NS, "g", uses=3, memory_id="m0"))
    store.close()
    for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    head = (tmp_path / HEAD_NAME).read_bytes()
    for attempt in (lambda: persistence.check(tmp_path), lambda: EmbeddedStore(tmp_path)):
        with pytest.raises(
            StoreCorruptError,
            match=f"{DB_NAME} cannot be read: is missing, but its head record lineage\\.head "
            "says op 5 and 1 writes of its grants table were committed",
        ):
            attempt()
        assert sorted(p.name for p in tmp_path.iterdir()) == [HEAD_NAME, LOCK_NAME]
        assert (tmp_path / HEAD_NAME).read_bytes() == head
    (tmp_path / HEAD_NAME).unlink()
    empty = EmbeddedStore(tmp_path)
    assert not empty.get_many(NS, ["m0"])
    empty.close()


def test_ops_lost_from_the_end_of_the_write_ahead_log_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash image whose write-ahead log was cut, or removed, while the store was
    down: SQLite drops the lost tail without a word, so the open and `check` compare
    the database's last op with the head record beside it and refuse, leaving the
    files as they were (before: the store opened without the acknowledged ops; an
    outside audit). Removing the record starts from what is there, as the refusal
    says. An undamaged crash image opens with every op."""
    monkeypatch.setattr(op_head, "HEAD_EVERY", 0.0)  # the record after every commit
    live, image = tmp_path / "live", tmp_path / "image"
    store = EmbeddedStore(live)
    for i in range(40):
        store.record(mem(f"m{i}"))
    image.mkdir()
    names = (DB_NAME, f"{DB_NAME}-wal", op_head.HEAD_NAME)
    for name in names:
        (image / name).write_bytes((live / name).read_bytes())
    store.close()
    intact = tmp_path / "intact"
    intact.mkdir()
    for name in names:
        (intact / name).write_bytes((image / name).read_bytes())
    wal = image / f"{DB_NAME}-wal"
    wal.write_bytes(wal.read_bytes()[: wal.stat().st_size // 2])  # the end of the log cut
    before = {n: sha(image / n) for n in names}
    for attempt in (lambda: persistence.check(image), lambda: EmbeddedStore(image)):
        with pytest.raises(
            StoreCorruptError, match=r"but its head record lineage\.head says op 40"
        ) as refused:
            attempt()
        # its own advice only (a review: the generic "restore the file from a backup,
        # or move it away" after it read as a contradiction after a restore on purpose)
        assert str(refused.value).endswith(
            "remove lineage.head to start from what is there; nothing on disk was changed "
            "[STORE_CORRUPT]"
        ), str(refused.value)
        assert {n: sha(image / n) for n in names} == before
    (image / op_head.HEAD_NAME).unlink()  # the operator accepts what is there
    opened = EmbeddedStore(image)
    assert 0 < len(opened.get_many(NS, [f"m{i}" for i in range(40)])) < 40
    opened.close()
    whole = EmbeddedStore(intact)  # a SIGKILL's image, undamaged
    assert len(whole.get_many(NS, [f"m{i}" for i in range(40)])) == 40
    whole.close()


def test_another_stores_database_copied_in_is_refused(tmp_path: Path) -> None:
    """A database is given a random identity at creation, kept in ``meta`` and in the
    head record: another store's database copied into the directory is refused at
    open and by `check`, files untouched (before: it passed, the record holding only
    counts, and the sidecar served another tenant's memories; an outside audit)."""
    a, b = written(tmp_path / "a", n=5), written(tmp_path / "b", n=8)
    head = json.loads((a / HEAD_NAME).read_text())
    assert head["store"] and head["store"] != json.loads((b / HEAD_NAME).read_text())["store"]
    (a / DB_NAME).write_bytes((b / DB_NAME).read_bytes())
    before = {n: sha(a / n) for n in (DB_NAME, HEAD_NAME)}
    for attempt in (lambda: persistence.check(a), lambda: EmbeddedStore(a)):
        with pytest.raises(
            StoreCorruptError,
            match=f"is another store's database .*, not the one its head record "
            f"lineage\\.head was written for \\(store {head['store']}\\)",
        ):
            attempt()
        assert {n: sha(a / n) for n in (DB_NAME, HEAD_NAME)} == before


def test_a_store_from_before_identities_opens_and_is_given_one(tmp_path: Path) -> None:
    """A database without an identity and a head record without one (written by an
    earlier version) open as before; the database is given an identity, which the
    record carries from then on."""
    written(tmp_path, n=3)
    con = rw(tmp_path)
    con.execute("DELETE FROM meta WHERE key = 'store'")
    con.close()
    old = {"seq": 3, "tables": {}, "crc": op_head._crc(3, {})}
    (tmp_path / HEAD_NAME).write_text(json.dumps(old))
    assert persistence.check(tmp_path).records == 3
    store = EmbeddedStore(tmp_path)
    assert len(store.get_many(NS, ["m0", "m1", "m2"])) == 3
    store.close()
    con = ro(tmp_path)
    given = con.execute("SELECT value FROM meta WHERE key = 'store'").fetchone()[0]
    con.close()
    assert json.loads((tmp_path / HEAD_NAME).read_text())["store"] == given
    EmbeddedStore(tmp_path).close()


# -- refusals at open ---------------------------------------------------------------------


def _edit_value(data: Path) -> None:
    con = rw(data)
    con.execute("UPDATE ops SET op = replace(op, 'Rome 3', 'Rime 3') WHERE seq = 4")
    con.close()


def _swap_two_ops(data: Path) -> None:
    con = rw(data)
    a, b = con.execute("SELECT op, crc FROM ops WHERE seq IN (5, 6) ORDER BY seq").fetchall()
    con.execute("UPDATE ops SET op = ?, crc = ? WHERE seq = 5", b)
    con.execute("UPDATE ops SET op = ?, crc = ? WHERE seq = 6", a)
    con.close()


def _delete_an_op(data: Path) -> None:
    con = rw(data)
    con.execute("DELETE FROM ops WHERE seq = 3")
    con.close()


def _rename_a_dependency(data: Path) -> None:
    """Valid JSON, a checksum that matches: the dependency does not exist."""
    con = rw(data)
    (text,) = con.execute("SELECT op FROM ops WHERE seq = 4").fetchone()
    op = json.loads(text)
    op["r"]["dependencies"] = ["ghost"]
    text = json.dumps(op, separators=(",", ":"))
    con.execute("UPDATE ops SET op = ?, crc = ? WHERE seq = 4", (text, persistence.crc(4, text)))
    con.close()


def _not_json(data: Path) -> None:
    con = rw(data)
    text = '{"o":"r",'
    con.execute("UPDATE ops SET op = ?, crc = ? WHERE seq = 2", (text, persistence.crc(2, text)))
    con.close()


def _nested_past_the_parser(data: Path) -> None:
    """A checksum that matches a text nested deeper than the JSON parser goes (before:
    RecursionError out of the open)."""
    con = rw(data)
    text = "[" * 5000
    con.execute("UPDATE ops SET op = ?, crc = ? WHERE seq = 2", (text, persistence.crc(2, text)))
    con.close()


def _empty_file(data: Path) -> None:
    (data / DB_NAME).write_bytes(b"")


def _not_a_database(data: Path) -> None:
    (data / DB_NAME).write_bytes(b"this is not a database, just text " * 200)


def _header_page_damaged(data: Path) -> None:
    raw = bytearray((data / DB_NAME).read_bytes())
    page = int.from_bytes(raw[16:18], "big")
    raw[page + 0] = 0x7F  # the second page's b-tree page type: no such type
    (data / DB_NAME).write_bytes(bytes(raw))


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "edited-value": (_edit_value, "op 4 fails its checksum"),
    "swapped-ops": (_swap_two_ops, "op 5 fails its checksum"),
    "deleted-op": (_delete_an_op, "ops 3..3 are missing"),
    "renamed-dependency": (
        _rename_a_dependency,
        "op 4 cannot be replayed: refers to 'ghost', which is not stored",
    ),
    "not-json": (_not_json, "op 2 is not valid JSON"),
    "nested-past-the-parser": (
        _nested_past_the_parser,
        "op 2 is not valid JSON (nested deeper than the parser goes)",
    ),
    "empty-file": (_empty_file, "is not a MemLineage store"),
    "not-a-database": (_not_a_database, "file is not a database"),
    "damaged-page": (_header_page_damaged, "database disk image is malformed"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_damaged_database_is_refused_and_left_as_it_was(tmp_path: Path, case: str) -> None:
    damage, problem = CASES[case]
    data = written(tmp_path / "d")
    damage(data)
    db = data / DB_NAME
    before = sha(db)
    with pytest.raises(StoreCorruptError) as err:
        EmbeddedStore(data)
    assert err.value.path == str(db)
    assert problem in err.value.problem
    assert str(db) in str(err.value) and "\n" not in str(err.value)
    assert sha(db) == before
    with pytest.raises(StoreCorruptError):
        persistence.check(data)
    assert sha(db) == before


def _edit_snapshot_rows(data: Path) -> None:
    con = rw(data)
    n = con.execute(
        "UPDATE snapshot SET data = replace(data, 'Rome 2', 'Rome 9') WHERE part = 1"
    ).rowcount
    assert n == 1
    con.close()


def _drop_snapshot_part(data: Path) -> None:
    con = rw(data)
    con.execute("DELETE FROM snapshot WHERE part = 1")
    con.close()


def _drop_snapshot_header(data: Path) -> None:
    con = rw(data)
    con.execute("DELETE FROM snapshot WHERE part = 0")
    con.close()


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (_edit_snapshot_rows, "snapshot part 1 fails its checksum"),
        (_drop_snapshot_part, "the snapshot has 0 of its 1 parts"),
        (_drop_snapshot_header, "the snapshot's header (part 0) is missing"),
    ],
    ids=["edited-rows", "missing-part", "missing-header"],
)
def test_a_damaged_snapshot_is_refused(
    tmp_path: Path, damage: Callable[[Path], None], problem: str
) -> None:
    data = written(tmp_path / "d", snapshot=True)
    damage(data)
    before = sha(data / DB_NAME)
    with pytest.raises(StoreCorruptError) as err:
        EmbeddedStore(data)
    assert problem in err.value.problem
    assert sha(data / DB_NAME) == before


# -- check and backup --------------------------------------------------------------------


def test_check_summarises_and_backup_copies_a_live_store(tmp_path: Path) -> None:
    data = written(tmp_path / "d", snapshot=True)
    store = EmbeddedStore(data, clock=ManualClock(NOW))
    summary = store.check()
    assert (summary.records, summary.namespaces, summary.ops) == (6, 1, 1)
    assert summary.snapshot_seq == 6 and summary.last_seq == 7
    assert summary.events == 6 + 2  # six recorded, the revoke and its cascade
    assert "6 records in 1 namespace," in summary.describe()

    stop = threading.Event()
    done: list[str] = []

    def write() -> None:
        i = 0
        while not stop.is_set() and i < 5000:
            store.record(mem(f"w{i}"))
            done.append(f"w{i}")
            i += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        while len(done) < 50:
            stop.wait(0.01)
        copied = store.backup(tmp_path / "copy")
    finally:
        stop.set()
        writer.join(timeout=30)
    assert copied.records >= 6 + 50
    with pytest.raises(FileExistsError):
        store.backup(tmp_path / "copy")
    # a directory holding only another store's head record: refused before copying
    # (before: copied, then its check failed against that record, the copy left there)
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / op_head.HEAD_NAME).write_bytes((data / op_head.HEAD_NAME).read_bytes())
    with pytest.raises(FileExistsError, match=r"lineage\.head exists"):
        store.backup(stale)
    assert sorted(p.name for p in stale.iterdir()) == [op_head.HEAD_NAME]
    store.close()
    copy = EmbeddedStore(tmp_path / "copy")
    assert copy.get(NS, "m5").status == "pending_verification"
    assert len(copy.get_many(NS, done)) == copied.records - 6
    copy.close()
    with pytest.raises(ValueError):
        EmbeddedStore().check()


# -- the old JSON-lines format ---------------------------------------------------------


def _old_directory(tmp_path: Path) -> tuple[Path, Path]:
    """The same writes in the SQLite form (``new``) and as the old log (``old``)."""
    new = written(tmp_path / "new")
    old = tmp_path / "old"
    old.mkdir()
    (old / "log.0.jsonl").write_text("".join(op + "\n" for _, op in ops(new)))
    return new, old


def _same(a: EmbeddedStore, b: EmbeddedStore) -> None:
    ids = [f"m{i}" for i in range(6)]
    assert a.get_many(NS, ids) == b.get_many(NS, ids)
    assert a.events(NS, limit=100) == b.events(NS, limit=100)
    assert a.due_for_review(NS, now=NOW + 10**6) == b.due_for_review(NS, now=NOW + 10**6)


def test_an_old_directory_is_imported_once_and_kept(tmp_path: Path) -> None:
    new, old = _old_directory(tmp_path)
    log = old / "log.0.jsonl"
    before = sha(log)
    imported = EmbeddedStore(old)
    reference = EmbeddedStore(new)
    _same(imported, reference)
    imported.record(mem("after"))
    imported.close()
    reference.close()
    assert sorted(p.name for p in old.iterdir()) == [
        HEAD_NAME,
        DB_NAME,
        LOCK_NAME,
        "log.0.jsonl.imported",
    ]
    assert sha(old / "log.0.jsonl.imported") == before  # renamed, not rewritten
    # The next open reads the database only: changing the old file changes nothing.
    (old / "log.0.jsonl.imported").write_text("garbage\n")
    again = EmbeddedStore(old)
    assert again.get(NS, "after").id == "after" and again.get(NS, "m5").id == "m5"
    again.close()


def test_an_old_log_of_older_ops_still_imports(tmp_path: Path) -> None:
    """Ops written before the review fields and before batched access recording."""
    _, old = _old_directory(tmp_path)
    lines = []
    for line in (old / "log.0.jsonl").read_text().splitlines():
        op = json.loads(line)
        op.pop("v", None)
        for name in ("confirmed_by", "contradicted_by", "uses_ok", "uses_failed", "reviewed_at"):
            op["r"].pop(name)
        lines.append(json.dumps(op))
    lines.append(json.dumps({"o": "a", "n": NS, "i": ["m1"], "a": NOW + 20}))
    (old / "log.0.jsonl").write_text("\n".join(lines) + "\n")
    store = EmbeddedStore(old, clock=ManualClock(NOW))
    m1 = store.get(NS, "m1")
    assert (m1.access_count, m1.last_access) == (1, NOW + 20)
    assert store.due_for_review(NS, now=NOW + 3600) == [f"m{i}" for i in range(6)]
    store.close()


def _old_snapshot(store: EmbeddedStore) -> dict[str, object]:
    """The old ``snapshot.json`` of a store, as the JSON-lines engine wrote it."""
    from memlineage.store.embedded.codec import event_to_json

    return {
        "generation": 1,
        "spaces": {
            ns: {
                "rows": [row.to_json() for row in sp.rows.values()],
                "claims": [[s, a, i] for (s, a), i in sp.claims.items()],
                "counters": sp.counters,
                "seq": sp.seq,
                "sources": sp.sources,
                "review": [[i, t] for i, t in sp.review.next.items()],
                "events": [event_to_json(e) for e in sp.events],
            }
            for ns, sp in store._state.spaces.items()
        },
    }


def test_an_old_snapshot_and_log_generation_import(tmp_path: Path) -> None:
    ref = EmbeddedStore(tmp_path / "ref", clock=ManualClock(NOW))
    ref.record(mem("m0", value="Paris"))
    ref.record(mem("m1", "m0", value="Rome"))
    ref.incr_counter(NS, "tool:x", now=NOW)
    ref.feedback(NS, ["m1"], True, now=NOW)
    snapshot = _old_snapshot(ref)
    ref.revoke(NS, "m0", reason="bad", now=NOW + 1)
    ref.close()
    old = tmp_path / "old"
    old.mkdir()
    (old / "snapshot.json").write_text(json.dumps(snapshot))
    (old / "log.1.jsonl").write_text(ops(tmp_path / "ref")[-1][1] + "\n")
    (old / "log.0.jsonl").write_text("covered by the snapshot: never read\n")
    imported = EmbeddedStore(old, clock=ManualClock(NOW))
    reference = EmbeddedStore(tmp_path / "ref", clock=ManualClock(NOW))
    assert imported.get_many(NS, ["m0", "m1"]) == reference.get_many(NS, ["m0", "m1"])
    assert imported.events(NS, limit=100) == reference.events(NS, limit=100)
    assert imported.count(NS, "tool:x", 3600, now=NOW) == 1
    assert imported.source_stats(NS, ["user:u"]) == reference.source_stats(NS, ["user:u"])
    imported.close()
    reference.close()
    assert sorted(p.name for p in old.iterdir()) == [
        HEAD_NAME,
        DB_NAME,
        LOCK_NAME,
        "log.0.jsonl.imported",
        "log.1.jsonl.imported",
        "snapshot.json.imported",
    ]


def _middle_line_garbage(old: Path) -> tuple[str, str]:
    lines = (old / "log.0.jsonl").read_text().splitlines()
    lines[2] = lines[2][:-7] + "#" + lines[2][-6:]
    (old / "log.0.jsonl").write_text("\n".join(lines) + "\n")
    return "log.0.jsonl", "line 3 is not valid JSON"


def _middle_line_nested_past_the_parser(old: Path) -> tuple[str, str]:
    lines = (old / "log.0.jsonl").read_text().splitlines()
    lines[2] = "[" * 5000
    (old / "log.0.jsonl").write_text("\n".join(lines) + "\n")
    return "log.0.jsonl", "line 3 is not valid JSON"


def _renamed_dependency(old: Path) -> tuple[str, str]:
    text = (
        (old / "log.0.jsonl").read_text().replace('"dependencies":["m2"]', '"dependencies":["m2x"]')
    )
    (old / "log.0.jsonl").write_text(text)
    return "log.0.jsonl", "line 4 cannot be replayed: refers to 'm2x', which is not stored"


def _truncated_snapshot(old: Path) -> tuple[str, str]:
    (old / "snapshot.json").write_text('{"generation": 1, "spaces": {"tenant:sql": {"ro')
    return "snapshot.json", "JSONDecodeError"


@pytest.mark.parametrize(
    "damage",
    [
        _middle_line_garbage,
        _middle_line_nested_past_the_parser,
        _renamed_dependency,
        _truncated_snapshot,
    ],
    ids=["bad-line", "nested-line", "renamed-dependency", "truncated-snapshot"],
)
def test_a_damaged_old_directory_is_refused_untouched(
    tmp_path: Path, damage: Callable[[Path], tuple[str, str]]
) -> None:
    _, old = _old_directory(tmp_path)
    name, problem = damage(old)
    files = {p.name: sha(p) for p in old.iterdir()}
    with pytest.raises(StoreCorruptError) as err:
        EmbeddedStore(old)
    assert err.value.path == str(old / name)
    assert problem in err.value.problem
    after = {p.name: sha(p) for p in old.iterdir() if p.name != LOCK_NAME}
    assert after == files  # no database, nothing renamed (the lock: held while it tried)


def test_an_import_interrupted_before_the_renames_finishes_them(tmp_path: Path) -> None:
    _, old = _old_directory(tmp_path)
    log = old / "log.0.jsonl"
    kept = log.read_text()
    EmbeddedStore(old).close()
    (old / "log.0.jsonl.imported").rename(log)  # as if the crash came before the rename
    store = EmbeddedStore(old)
    assert len(store.get_many(NS, [f"m{i}" for i in range(6)])) == 6
    store.close()
    assert not log.exists() and (old / "log.0.jsonl.imported").read_text() == kept


def test_a_large_load_is_moved_out_of_the_collectors_generations(tmp_path: Path) -> None:
    """A restart of many rows freezes them (`gc.freeze`): the collector's next pass does
    not scan each loaded object as young, nor its full passes while serving; a small
    store leaves the collector alone."""
    import gc

    big, small = tmp_path / "big", tmp_path / "small"
    for path, n in ((big, persistence.FREEZE_ROWS), (small, 50)):
        store = EmbeddedStore(path, clock=ManualClock(NOW))
        for i in range(n):
            store.record(mem(f"m{i}", *((f"m{i - 1}",) if i else ())))
        store.compact()
        store.close()
    gc.unfreeze()
    try:
        before = gc.get_freeze_count()
        EmbeddedStore(small).close()
        assert gc.get_freeze_count() == before
        store = EmbeddedStore(big)
        assert gc.get_freeze_count() >= before + persistence.FREEZE_ROWS
        assert store.get(NS, f"m{persistence.FREEZE_ROWS - 1}").dependencies
        store.close()
    finally:
        gc.unfreeze()


def test_a_snapshot_omits_columns_at_their_default_and_reads_either_form(tmp_path: Path) -> None:
    """A part leaves out the columns every one of its rows has at the field's default
    (a quarter less to write and to parse at a restart); a part that lists them all,
    as snapshots written before did, reads the same."""
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    for i in range(30):
        store.record(mem(f"m{i}", *((f"m{i - 1}",) if i else ())))
    store.record(mem("claim", value="Paris"))
    store.compact()
    live = store.get_many(NS, [f"m{i}" for i in range(30)] + ["claim"], with_history=True)
    store.close()
    db = sqlite3.connect(tmp_path / DB_NAME)
    [(data,)] = db.execute("SELECT data FROM snapshot WHERE part = 1").fetchall()
    columns = json.loads(data)["c"]
    assert {"id", "creator_id", "dependencies"} <= set(columns)
    assert "value" in columns  # one row has one
    assert not {"successor", "confirmed_by", "reviewed_at"} & set(columns)
    reopened = EmbeddedStore(tmp_path)
    assert reopened.get_many(NS, list(live), with_history=True) == live
    reopened.close()
    # the older form: every column, defaults written out
    part = json.loads(data)
    n = len(part["v"])
    for name in ("successor", "confirmed_by", "contradicted_by", "reviewed_at"):
        part["c"][name] = [[] if name.endswith("_by") else None] * n
    text = json.dumps(part, separators=(",", ":"))
    db.execute(
        "UPDATE snapshot SET data = ?, crc = ? WHERE part = 1", (text, persistence.crc(1, text))
    )
    db.commit()
    db.close()
    reopened = EmbeddedStore(tmp_path)
    assert reopened.get_many(NS, list(live), with_history=True) == live
    reopened.close()

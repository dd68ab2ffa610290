"""The side tables' tally (`store/embedded/table_tally.py`): rows deleted or replaced
by hand, and a write-ahead log cut that loses only grant spends, are refused at open
and by `store check`, with the files left as they were (before: each opened, and a
spent grant use was given back without a word; a known gap of the head record)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from memlineage.lineage import ManualClock, MemoryRecord
from memlineage.lineage.grants import GrantRecord
from memlineage.store.embedded import EmbeddedStore, op_head, persistence
from memlineage.store.embedded.dir_lock import LOCK_NAME
from memlineage.store.embedded.op_head import HEAD_NAME
from memlineage.store.embedded.persistence import DB_NAME, StoreCorruptError
from memlineage.store.embedded.summed_rows import row_crc
from support.grants import user_grant
from support.memories import NOW
from support.proposals import stale_at_now

NS = "tenant:tally"
GRANT = "g-pay"
MEMORY = "bill"


def _grant(gid: str = GRANT, uses: int = 3) -> GrantRecord:
    return user_grant(NS, gid, uses=uses, memory_id=MEMORY)


def populated(data: Path) -> Path:
    """A closed store: a memory, two grants (one use of the first spent), one proposal."""
    store = EmbeddedStore(data, clock=ManualClock(NOW))
    try:
        store.record(MemoryRecord(id=MEMORY, namespace=NS, creator_id="agent:planner"))
        store.put_grant(_grant())
        store.put_grant(_grant("g-other"))
        assert store.use_grants(NS, [GRANT])
        store.save_proposal(stale_at_now(NS, MEMORY, objected=True), "objected")
    finally:
        store.close()
    return data


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sql(data: Path, *statements: tuple[str, tuple[object, ...]]) -> None:
    con = sqlite3.connect(data / DB_NAME, isolation_level=None)
    try:
        for sql, args in statements:
            con.execute(sql, args)
    finally:
        con.close()


def _refused(data: Path, problem: str) -> None:
    """`store check` and an open both refuse with `problem`, changing no file (but the
    directory's lock, which an open takes)."""

    def files() -> dict[str, str]:
        return {p.name: sha(p) for p in data.iterdir() if p.name != LOCK_NAME}

    before = files()
    for attempt in (lambda: persistence.check(data), lambda: EmbeddedStore(data)):
        with pytest.raises(StoreCorruptError, match=problem):
            attempt()
    assert files() == before


@pytest.mark.parametrize(("table", "key"), [("grants", "id"), ("proposals", "memory")])
def test_a_row_deleted_by_hand_is_refused(tmp_path: Path, table: str, key: str) -> None:
    """Every row left holds its checksum, so only the tally shows the loss (a spent
    grant deleted by hand could be put again unspent; a proposal's objection gone)."""
    data = populated(tmp_path / "d")
    name = GRANT if table == "grants" else MEMORY
    _sql(data, (f"DELETE FROM {table} WHERE {key} = ?", (name,)))
    rows = 1 if table == "grants" else 0
    _refused(data, rf"the {table} table holds {rows} rows, but its tally says {rows + 1}")


def test_a_spent_use_given_back_with_its_checksum_rewritten_is_refused(tmp_path: Path) -> None:
    """A writer who knows the row format sets `used` back and writes the matching
    checksum: the row decodes and holds its checksum, but is not the row the tally
    was written for (before: the open served the grant with its use given back)."""
    data = populated(tmp_path / "d")
    con = sqlite3.connect(data / DB_NAME)
    try:
        (text,) = con.execute("SELECT data FROM grants WHERE id = ?", (GRANT,)).fetchone()
    finally:
        con.close()
    unspent = text.replace(",1,", ",0,", 1)
    assert unspent != text
    _sql(
        data,
        (
            "UPDATE grants SET data = ?, crc = ? WHERE id = ?",
            (unspent, row_crc(NS, GRANT, unspent), GRANT),
        ),
    )
    _refused(data, "the grants table's rows are not the ones its tally was written for")


def test_a_cut_log_that_loses_only_grant_spends_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ops checkpointed into the database, then grant uses spent (their rows only in
    the write-ahead log) and the log removed from a crash image: the op log is whole,
    so only the grants' write count against the head record shows the loss. Removing
    the record starts from what is there, as the refusal says; the undamaged image
    opens with every use spent."""
    monkeypatch.setattr(op_head, "HEAD_EVERY", 0.0)  # the record after every commit
    live, image, intact = tmp_path / "live", tmp_path / "image", tmp_path / "intact"
    store = EmbeddedStore(live, clock=ManualClock(NOW))
    store.record(MemoryRecord(id=MEMORY, namespace=NS, creator_id="agent:planner"))
    store.put_grant(_grant(uses=5))
    store.compact()  # the ops and the grant in the database file itself
    con = sqlite3.connect(live / DB_NAME, isolation_level=None)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
    for _ in range(3):
        assert store.use_grants(NS, [GRANT])
    names = (DB_NAME, f"{DB_NAME}-wal", HEAD_NAME)
    for d in (image, intact):
        d.mkdir()
        for name in names:
            (d / name).write_bytes((live / name).read_bytes())
    store.close()
    (image / f"{DB_NAME}-wal").unlink()  # the log lost with the crash
    _refused(image, r"holds \d+ writes of its grants table, but its head record lineage\.head")
    (image / HEAD_NAME).unlink()  # the operator accepts what is there
    opened = EmbeddedStore(image, clock=ManualClock(NOW))
    try:
        [g] = opened.grants(NS)
        assert g.used == 0
    finally:
        opened.close()
    whole = EmbeddedStore(intact, clock=ManualClock(NOW))  # a SIGKILL's image, undamaged
    try:
        [g] = whole.grants(NS)
        assert g.used == 3
    finally:
        whole.close()
    assert persistence.check(intact).grants == 1


def test_the_tally_follows_puts_replacements_drops_and_reopens(tmp_path: Path) -> None:
    """No false refusal: a store whose grants are put, spent, dropped to make room,
    and whose proposals are saved and dropped, checks and reopens (three times)."""
    data = tmp_path / "d"
    for round_ in range(3):
        store = EmbeddedStore(data, clock=ManualClock(NOW), max_grants=2)
        try:
            if round_ == 0:
                store.record(MemoryRecord(id=MEMORY, namespace=NS, creator_id="agent:planner"))
            one = _grant(f"g{round_}", uses=1)
            store.put_grant(one)
            assert store.use_grants(NS, [one.id])  # spent: inert, dropped for the next
            store.save_proposal(stale_at_now(NS, MEMORY, objected=round_ == 1), "objected")
            if round_ == 2:
                store.drop_proposal(NS, MEMORY)
        finally:
            store.close()
        summary = persistence.check(data)
        assert summary.grants == min(round_ + 1, 2)


def test_a_head_record_that_cannot_be_written_is_said_once_and_its_return(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The record is written on the side of each commit: a failure is not the
    write's, but it weakens the check at the next open, so it is logged once (not
    every second) and so is its end (before: swallowed without a word). A failed
    write (here its rename; on a full disk, the write of the temporary file)
    removes its temporary file (before: one was left behind each time)."""
    monkeypatch.setattr(op_head, "HEAD_EVERY", 0.0)
    data = tmp_path / "d"
    store = EmbeddedStore(data, clock=ManualClock(NOW))
    try:
        (data / HEAD_NAME).unlink(missing_ok=True)
        (data / HEAD_NAME).mkdir()  # a directory in its place: the rename fails
        with caplog.at_level("WARNING", logger="memlineage.store"):
            for i in range(3):
                store.record(MemoryRecord(id=f"m{i}", namespace=NS, creator_id="agent:a"))
            assert not list(data.glob(f"{HEAD_NAME}.*.tmp"))
            (data / HEAD_NAME).rmdir()
            store.record(MemoryRecord(id="m3", namespace=NS, creator_id="agent:a"))
    finally:
        store.close()
    assert not list(data.glob(f"{HEAD_NAME}.*.tmp"))
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert "cannot be written" in said[0] and "is written again" in said[1]
    assert json.loads((data / HEAD_NAME).read_text())["seq"] == 4


def test_check_of_a_live_store_reads_rows_and_tally_as_of_one_moment(tmp_path: Path) -> None:
    """`store check` on a store spending grant uses and saving proposals meanwhile
    never reports a tally mismatch: each table's rows and its tally are read in one
    read transaction (before: in two, and a commit between them was reported as a
    row replaced by hand, in about half the checks; an outside audit)."""
    store = EmbeddedStore(tmp_path / "live", clock=ManualClock(NOW))
    store.record(MemoryRecord(id=MEMORY, namespace=NS, creator_id="agent:planner"))
    store.put_grant(_grant(uses=1_000_000))
    stop, saved = threading.Event(), threading.Event()

    def spend() -> None:
        while not stop.is_set():
            assert store.use_grants(NS, [GRANT])
            store.save_proposal(stale_at_now(NS, MEMORY, objected=True), "objected")
            saved.set()

    writer = threading.Thread(target=spend, daemon=True)
    writer.start()
    try:
        assert saved.wait(10)  # the proposal is there before the first check counts it
        deadline = time.monotonic() + 3.0
        checks = 0
        while time.monotonic() < deadline and checks < 60:
            summary = persistence.check(tmp_path / "live")
            assert (summary.grants, summary.proposals) == (1, 1)
            checks += 1
        assert checks >= 10
    finally:
        stop.set()
        writer.join(timeout=10)
        store.close()

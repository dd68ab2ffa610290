"""The embedded store on a full disk: its data directory on a real small file system
(a tmpfs mounted for the test, so the database, its write-ahead log, the head record
and the checkpoints all meet ENOSPC), filled up through the real client.

A write that finds no room is refused UNAVAILABLE naming the full file system, nothing
of it is kept (`store check` counts only the acknowledged records), reads (Check,
Explain) still answer, and once space is freed writes go through again without a
restart. A sidecar stopped or killed while the disk is full keeps every acknowledged
record, and its log says what happened without a traceback."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from memlineage.client import MemLineageClient, NotFound, Unavailable
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.errors import StoreUnavailableError
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore, persistence
from memlineage.store.embedded.sqlite_conn import connect_rw, transaction
from memlineage_dsl.facts import Creator
from support.serve_process import ServeProcess
from support.sidecar import BUNDLED_POLICIES

ALICE = Creator("user", "user:alice")


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` (made), unmounted at the end whatever
    happened (lazily: a process still holding a file there does not keep it)."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        check=True,
        capture_output=True,
        timeout=10,
    )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True, timeout=10)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "fs", "2m") as fs:
        yield fs


def fill(fs: Path, leave: int = 0) -> Path:
    """A filler file taking all but about `leave` bytes of `fs`'s free space."""
    filler = fs / "filler"
    st = os.statvfs(fs)
    want = max(st.f_bavail * st.f_frsize - leave, 0)
    with filler.open("ab") as f, contextlib.suppress(OSError):  # ENOSPC: full is what was wanted
        while want > 0:
            n = min(want, 1 << 16)
            f.write(b"\0" * n)
            f.flush()
            want -= n
    return filler


def record_until_refused(client: MemLineageClient, prefix: str) -> tuple[list[str], Unavailable]:
    """Records through the client until one is refused (bounded): the ids acknowledged
    as recorded, and the refusal."""
    acked: list[str] = []
    for i in range(2000):
        memory_id = f"{prefix}{i}"
        try:
            answer = client.record(memory_id, creator="user:alice", tags=["tea", "x" * 60])
        except Unavailable as refused:
            return acked, refused
        assert answer.recorded
        acked.append(memory_id)
    raise AssertionError("2000 records fit on a 2 MiB file system")


def store_check(data: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "memlineage", "store", "check", str(data)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out
    return out.stdout


def serve(data: Path, *extra: str) -> ServeProcess:
    return ServeProcess(["--policies", BUNDLED_POLICIES, "--data-dir", str(data), *extra])


def test_a_full_disk_refuses_writes_precisely_reads_answer_and_freed_space_takes_writes(
    small_fs: Path,
) -> None:
    data = small_fs / "data"
    sidecar = serve(data, "--sweep-interval", "0.2", "--access-flush-seconds", "0.2")
    try:
        with MemLineageClient(sidecar.address, timeout=10, retries=0) as client:
            client.record("first", creator="user:alice")
            filler = fill(small_fs, leave=256 * 1024)
            acked, refused = record_until_refused(client, "m")
            assert acked, "nothing fitted in 256 KiB"
            fill(small_fs)  # what a smaller write would still fit in
            assert refused.reason == "STORE_UNAVAILABLE"
            assert f"no room left on the file system of {data}" in refused.details
            assert "free" in refused.details and "INTERNAL" not in str(refused)
            with pytest.raises(Unavailable):  # and the next one, and the next
                client.record("another", creator="user:alice")
            # nothing of the refused write is there
            with pytest.raises(NotFound):
                client.explain(f"m{len(acked)}")
            # reads answer, Explain too (it writes the buffered reads first: before, it
            # was refused UNAVAILABLE with the write it had tried)
            for memory_id in ("first", acked[0], acked[-1]):
                decision = client.check("read", memory_id)
                assert decision.memory_ids == [memory_id]
                assert client.explain(memory_id, decisions=5).memory.id == memory_id
            ranked = client.filter_rank([("first", 0.5), (acked[-1], 0.9)])
            assert sorted(ranked.ranked_ids) == sorted(["first", acked[-1]])
            time.sleep(1.0)  # sweeps and flushes meet the full disk meanwhile
            assert client.health() == "SERVING"
            assert f"ok, {len(acked) + 1} records" in store_check(data)

            filler.unlink()
            assert client.record("after", creator="user:alice").recorded  # no restart
            assert client.explain("after").memory.id == "after"
    finally:
        code = sidecar.stop()
    out = sidecar.rest()
    assert code == 0, out
    assert "Traceback" not in out, out
    # said once each, not per refused write, sweep or flush
    assert out.count("writes are refused: no room left on the file system") == 1, out
    assert out.count("writes go through again") == 1, out
    assert out.count("governance sweep failed") == 1, out
    assert f"ok, {len(acked) + 2} records" in store_check(data)


def test_a_sidecar_stopped_or_killed_on_a_full_disk_keeps_every_acknowledged_record(
    small_fs: Path,
) -> None:
    """SIGTERM while the disk is full: the final flushes fail, said without a
    traceback; a sidecar started again on the still-full disk serves and refuses
    writes; SIGKILLed, then started again once space is freed: every acknowledged
    record is there and `store check` passes."""
    data = small_fs / "data"
    sidecar = serve(data, "--sweep-interval", "0")
    try:
        with MemLineageClient(sidecar.address, timeout=10, retries=0) as client:
            filler = fill(small_fs, leave=256 * 1024)
            acked, _ = record_until_refused(client, "m")
            for memory_id in acked[:5]:
                client.check("read", memory_id)  # reads and decisions left to flush
    finally:
        code = sidecar.stop()
    out = sidecar.rest()
    assert code == 0, out
    assert "Traceback" not in out, out
    assert "final access flush failed: the access statistics of 5 memories" in out, out
    assert "final flush of kept decisions failed" in out, out

    sidecar = serve(data, "--sweep-interval", "0")  # the disk still full
    try:
        with MemLineageClient(sidecar.address, timeout=10, retries=0) as client:
            with pytest.raises(Unavailable) as refused:
                client.record("while-full", creator="user:alice")
            assert "no room left on the file system" in refused.value.details
            assert client.explain(acked[-1]).memory.id == acked[-1]
    finally:
        sidecar.kill()
    assert "Traceback" not in sidecar.rest()

    filler.unlink()
    assert f"ok, {len(acked)} records" in store_check(data)
    sidecar = serve(data, "--sweep-interval", "0")
    try:
        with MemLineageClient(sidecar.address, timeout=10, retries=0) as client:
            for memory_id in acked:
                assert client.explain(memory_id).memory.id == memory_id
            with pytest.raises(NotFound):
                client.explain("while-full")
            assert client.record("after", creator="user:alice").recorded
    finally:
        assert sidecar.stop() == 0
    assert "Traceback" not in sidecar.rest()
    assert f"ok, {len(acked) + 1} records" in store_check(data)


def test_a_read_finding_many_reads_pending_is_answered_on_a_full_disk(small_fs: Path) -> None:
    """A read that finds `max_pending` reads buffered writes them itself; on a full disk
    that write is refused, and the read was refused with it (every 10,000th read of
    a busy sidecar); now it is answered and the sums wait for the next flush."""
    store = EmbeddedStore(small_fs / "data")
    try:
        engine = Engine(store, PolicyHolder(BUNDLED_POLICIES))
        engine.access.max_pending = 3
        rec = MemoryRecord(id="m", namespace="default", creator_kind="user", creator_id=ALICE.id)
        assert engine.record(rec).memory is not None
        fill(small_fs)
        for _ in range(6):  # two full queues: each read answered
            assert engine.check("default", "read", ["m"], ALICE).decision is not None
        assert engine.access.pending() == 1  # one memory's sums, kept
        with pytest.raises(StoreUnavailableError, match="no room left"):
            engine.flush_access()
    finally:
        store.close()


def test_a_snapshot_that_does_not_fit_is_refused_unavailable_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """Folding the op log into a snapshot (the flush's upkeep) on a disk without room
    for it: StoreUnavailableError naming the full file system (before: sqlite3's own
    error, logged with a traceback at every flush); the ops stay and the next fold,
    once there is room, goes through."""
    with tmpfs(tmp_path / "fs", "8m") as fs:
        store = EmbeddedStore(fs / "data")
        try:
            for i in range(300):
                rec = MemoryRecord(
                    id=f"m{i}",
                    namespace="ns",
                    creator_id=ALICE.id,
                    tags=tuple(f"t{j}-{'x' * 60}" for j in range(8)),
                )
                store.record(rec)
            filler = fill(fs, leave=32 * 1024)
            with pytest.raises(StoreUnavailableError, match="no room left on the file system"):
                store.compact()
            summary = store.check()
            assert (summary.records, summary.snapshot_seq, summary.ops) == (300, 0, 300)
            filler.unlink()
            store.compact()
            summary = store.check()
            assert (summary.records, summary.snapshot_seq, summary.ops) == (300, 300, 0)
        finally:
            store.close()


def test_a_transaction_sqlite_rolled_back_on_a_full_disk_says_the_disk(
    tmp_path: Path,
) -> None:
    """SQLite rolls a transaction back itself when the disk fills under it; the
    ROLLBACK that followed raised "cannot rollback - no transaction is active" over
    the reason (a grant or proposal write was refused naming that)."""
    with tmpfs(tmp_path / "fs", "1m") as fs:
        db = connect_rw(fs / "t.sqlite3", False)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("CREATE TABLE t (x TEXT)")
            full = pytest.raises(sqlite3.OperationalError, match="database or disk is full")
            with full, transaction(db):
                for _ in range(20_000):  # past the page cache: spilled, not at COMMIT
                    db.execute("INSERT INTO t VALUES (?)", ("y" * 500,))
            assert not db.in_transaction
            with transaction(db):  # the connection goes on
                db.execute("INSERT INTO t VALUES ('z')")
            assert db.execute("SELECT count(*) FROM t").fetchone()[0] == 1
        finally:
            db.close()


def test_the_periodic_fold_waits_after_a_refused_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fold writes the whole state under the store's lock: on a disk without room
    for it, every flush's fold stalled every request as long, only to be refused again.
    After a refused fold the periodic one waits (5 s, doubling to 5 minutes); an
    explicit `compact()` still tries at once, and one that goes through ends the wait."""
    monkeypatch.setattr(persistence, "FOLD_WAIT_FIRST", 0.5)
    with tmpfs(tmp_path / "fs", "8m") as fs:
        store = EmbeddedStore(fs / "data")
        try:
            for i in range(300):
                tags = tuple(f"t{j}-{'x' * 60}" for j in range(8))
                store.record(
                    MemoryRecord(id=f"m{i}", namespace="ns", creator_id=ALICE.id, tags=tags)
                )
            filler = fill(fs, leave=32 * 1024)
            with pytest.raises(StoreUnavailableError, match=r"tried again in 0\.5 s"):
                store.maybe_compact(0)
            assert store.maybe_compact(0) is False  # within the wait: not tried (no error)
            time.sleep(0.6)
            with pytest.raises(StoreUnavailableError, match=r"tried again in 1 s"):  # doubled
                store.maybe_compact(0)
            filler.unlink()
            store.compact()  # asked for: tried at once, and it fits
            assert store.check().ops == 0
            store.record(MemoryRecord(id="after", namespace="ns", creator_id=ALICE.id))
            assert store.maybe_compact(0) is True  # the wait ended with the fold that fit
        finally:
            store.close()

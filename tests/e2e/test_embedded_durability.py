"""The embedded store's data directory under faults, with real processes: a
`memlineage serve --data-dir` killed with SIGKILL mid-load keeps every write it
acknowledged; a damaged database (a flipped byte, a truncated file, a hand-edited
op) makes `memlineage serve` refuse to start with one line and a non-zero exit,
the file byte-for-byte as it was; `memlineage store check` / `backup` on a live
directory."""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from memlineage.client import MemLineageClient, MemLineageError
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage.store.embedded.dir_lock import LOCK_NAME
from memlineage.store.embedded.op_head import HEAD_NAME
from memlineage.store.embedded.persistence import DB_NAME
from memlineage.v1 import memlineage_pb2 as pb
from support.serve_process import REASONING_POLICY, ServeProcess, serve_refusal

POLICY = REASONING_POLICY
NS = "default"


def Server(data: Path, policies: Path) -> ServeProcess:
    """`memlineage serve --data-dir` on the policy directory."""
    return ServeProcess(["--policies", str(policies), "--data-dir", str(data)])


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    p = tmp_path / "policies"
    p.mkdir()
    (p / "main.mlp").write_text(POLICY)
    return p


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for s in started:
        s.kill()


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memlineage", *args], capture_output=True, text=True, timeout=timeout
    )


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sigkill_mid_load_keeps_every_acknowledged_record(
    tmp_path: Path, policies: Path, servers: list[Server]
) -> None:
    data = tmp_path / "data"
    server = Server(data, policies)
    servers.append(server)
    acked: list[str] = []
    failed: list[BaseException] = []

    def load() -> None:
        with MemLineageClient(server.address, timeout=5) as c:
            i = 0
            while i < 100_000:
                memory_id = f"m{i}"
                deps = [f"m{i - 1}"] if i and i % 3 else []
                try:
                    out = c.record(
                        memory_id,
                        creator="tool:crawler",
                        confidence=0.9,
                        dependencies=deps,
                        claim=("doc", f"k{i % 50}", f"v{i}"),
                    )
                except MemLineageError as exc:  # the server died: stop
                    failed.append(exc)
                    return
                assert out.recorded
                acked.append(memory_id)
                i += 1

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    deadline = time.monotonic() + 60
    while len(acked) < 300 and time.monotonic() < deadline and loader.is_alive():
        time.sleep(0.05)
    assert len(acked) >= 300, failed
    server.kill()  # SIGKILL while the client is still recording
    loader.join(timeout=30)
    assert not loader.is_alive() and failed, "the loader should have seen the server die"
    assert server.proc.returncode == -signal.SIGKILL

    # Through the store itself: every acknowledged record, with its lineage.
    store = EmbeddedStore(data)
    try:
        got = store.get_many(NS, acked)
        assert sorted(got) == sorted(acked)
        for memory_id in acked[1:]:
            i = int(memory_id[1:])
            expected = (f"m{i - 1}",) if i % 3 else ()
            assert got[memory_id].dependencies == expected
        store.check()
    finally:
        store.close()

    # Through a restarted server: Explain and Check see them.
    again = Server(data, policies)
    servers.append(again)
    with MemLineageClient(again.address, timeout=10) as c:
        for memory_id in [*acked[:: max(1, len(acked) // 50)], acked[-1]]:
            assert c.explain(memory_id).memory.id == memory_id
            assert c.check("read", memory_id).effect == pb.EFFECT_ALLOW
    assert again.stop() == 0


def _populate(data: Path) -> None:
    store = EmbeddedStore(data, clock=ManualClock(1_700_000_000.0))
    for i in range(600):
        store.record(
            MemoryRecord(
                id=f"mem:{i:04d}",
                namespace=NS,
                creator_id="user:u",
                subject="trip",
                attribute=f"leg{i}",
                value=f"Paris to Rome, seat {i:04d}, window, aisle",
                dependencies=(f"mem:{i - 1:04d}",) if i else (),
            )
        )
    store.close()


def _flip_middle_byte(db: Path) -> None:
    raw = bytearray(db.read_bytes())
    raw[len(raw) // 2] ^= 0x20
    db.write_bytes(bytes(raw))


def _truncate(db: Path) -> None:
    raw = db.read_bytes()
    db.write_bytes(raw[: len(raw) // 2])


def _edit_a_value(db: Path) -> None:
    con = sqlite3.connect(db, isolation_level=None)
    try:  # a letter changed inside a stored value, the checksum left as it was
        n = con.execute(
            "UPDATE ops SET op = replace(op, 'seat 0300', 'seat 0301') WHERE op LIKE '%seat 0300%'"
        ).rowcount
        assert n == 1
    finally:
        con.close()


@pytest.mark.parametrize(
    "damage",
    [_flip_middle_byte, _truncate, _edit_a_value],
    ids=["flipped-byte", "truncated", "hand-edited"],
)
@pytest.mark.any_runtime
def test_a_damaged_database_refuses_to_start_and_is_left_untouched(
    tmp_path: Path, policies: Path, damage
) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    _populate(data)
    db = data / DB_NAME
    assert sorted(p.name for p in data.iterdir()) == [
        HEAD_NAME,
        DB_NAME,
        LOCK_NAME,
    ]  # closed: no WAL
    damage(db)
    before = sha(db)

    line = serve_refusal(["--policies", str(policies), "--data-dir", str(data)])
    assert line.startswith(f"error: embedded store {db} cannot be read: ")
    assert "nothing on disk was changed" in line
    assert sha(db) == before

    checked = cli("store", "check", str(data))
    assert checked.returncode == 1
    assert checked.stderr.strip() == line
    assert sha(db) == before


@pytest.mark.any_runtime
def test_a_removed_database_refuses_to_start(tmp_path: Path, policies: Path) -> None:
    """The database removed after a clean stop, its head record left: `serve` refuses
    with one line naming the file, and `store check` says the same (before: the
    sidecar served an empty store and rewrote the record; an outside audit)."""
    data = tmp_path / "data"
    _populate(data)
    for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"):
        (data / name).unlink(missing_ok=True)
    line = serve_refusal(["--policies", str(policies), "--data-dir", str(data)])
    assert line.startswith(f"error: embedded store {data / DB_NAME} cannot be read: is missing")
    assert f"remove {HEAD_NAME} to start an empty store" in line
    assert not (data / DB_NAME).exists()
    checked = cli("store", "check", str(data))
    assert (checked.returncode, checked.stderr.strip()) == (1, line)


def _check_read_only(data: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`store check DATA` with DATA bind-mounted read-only, in a mount namespace of its
    own (`unshare`, util-linux; a machine that cannot make one fails here, it does not
    skip: the suite needs it)."""
    assert shutil.which("unshare") is not None, "unshare (util-linux) is needed"
    made = subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=timeout)
    assert made.returncode == 0, f"unshare -rm cannot make a mount namespace: {made.stderr!r}"
    d = shlex.quote(str(data))
    script = (
        f"mount --bind {d} {d} && mount -o remount,ro,bind {d} {d} && "
        f"exec {shlex.quote(sys.executable)} -m memlineage store check {d}"
    )
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.any_runtime
def test_store_check_on_a_read_only_file_system(tmp_path: Path) -> None:
    """A cleanly stopped store on a read-only file system is checked (opened
    immutable: no -shm to make); a crash image there whose -wal needs a -shm that
    cannot be made is said to be unopenable, not damaged (before: both were reported
    as corruption with advice to move the store away; an outside audit)."""
    clean, crashed = tmp_path / "clean", tmp_path / "crashed"
    store = EmbeddedStore(clean, clock=ManualClock(1_700_000_000.0))
    for i in range(5):
        store.record(MemoryRecord(id=f"m{i}", namespace=NS, creator_id="user:u"))
    crashed.mkdir()
    for name in (DB_NAME, f"{DB_NAME}-wal", HEAD_NAME):
        (crashed / name).write_bytes((clean / name).read_bytes())
    store.close()
    ok = _check_read_only(clean)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"{clean / DB_NAME}: ok, 5 records")
    refused = _check_read_only(crashed)
    assert refused.returncode == 1
    line = refused.stderr.strip()
    assert line.startswith(f"error: embedded store {crashed / DB_NAME} cannot be opened: its ")
    assert "file system is read-only" in line and "this is not damage" in line
    assert "STORE_CORRUPT" not in line and "move it away" not in line


def test_a_data_directory_removed_while_serving_refuses_writes(
    tmp_path: Path, policies: Path, servers: list[Server]
) -> None:
    """`rm -rf` of the data directory under a serving sidecar: the next Record is
    UNAVAILABLE naming the file (not recorded into an unlinked file), the log says
    why, and health goes NOT_SERVING (before: every write answered recorded=True,
    health stayed SERVING, and all was lost at the restart; an outside audit)."""
    data = tmp_path / "data"
    server = Server(data, policies)
    servers.append(server)
    with MemLineageClient(server.address, timeout=10) as c:
        assert c.record("before", creator="user:u").recorded
        shutil.rmtree(data)
        for i in range(3):
            with pytest.raises(MemLineageError) as refused:
                c.record(f"after{i}", creator="user:u")
            assert refused.value.code.name == "UNAVAILABLE"
            assert f"{data / DB_NAME}: the database is no longer at its path" in str(refused.value)
        server.expect(r"no longer the file it opened", timeout=20)
        deadline = time.monotonic() + 10.0
        while c.health() != "NOT_SERVING" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.health() == "NOT_SERVING"
    assert server.stop() == 0
    assert not data.exists()


def test_a_write_refused_after_the_database_was_removed_is_never_read(
    tmp_path: Path, policies: Path, servers: list[Server]
) -> None:
    """`rm -rf` of the data directory under a serving sidecar, then a Record: it is
    UNAVAILABLE, and nothing reads it afterwards: Explain does not find it, Check and
    FilterRank answer it as an id never written (a doubtful reasoning memory a read
    would deny if it were held), and the other memory is answered as before. The
    refused write is committed into the removed file only; the store applies an op
    after that commit and its check of the file."""
    started = time.monotonic()
    data = tmp_path / "data"
    server = Server(data, policies)
    servers.append(server)
    with MemLineageClient(server.address, timeout=10) as c:
        assert c.record("before", creator="user:u").recorded
        assert c.check("read", "guess-0").effect == pb.EFFECT_ALLOW  # an unknown id
        c.record("guess-0", creator="reasoning:planner", confidence=0.3)
        assert c.check("read", "guess-0").effect == pb.EFFECT_DENY  # held: denied
        shutil.rmtree(data)
        with pytest.raises(MemLineageError) as refused:
            c.record("guess-1", creator="reasoning:planner", confidence=0.3)
        assert refused.value.code.name == "UNAVAILABLE"
        with pytest.raises(MemLineageError) as missing:
            c.explain("guess-1", decisions=5)
        assert missing.value.code.name == "NOT_FOUND"
        assert c.explain("before").memory.id == "before"
        assert c.check("read", "guess-1").effect == pb.EFFECT_ALLOW
        ranked = c.filter_rank([("guess-1", 0.9), ("never", 0.9), ("guess-0", 0.9)])
        by_id = {x.memory_id: x for x in ranked.candidates}
        for field in ("kept", "reliability", "value_score", "rank_score"):
            assert getattr(by_id["guess-1"], field) == getattr(by_id["never"], field), field
        assert by_id["guess-1"].decision.effect == pb.EFFECT_ALLOW
        assert not by_id["guess-0"].kept  # the memory held before: as before
    server.kill()
    assert time.monotonic() - started < 60


@pytest.mark.any_runtime
def test_store_check_and_backup_while_a_server_writes(
    tmp_path: Path, policies: Path, servers: list[Server]
) -> None:
    data = tmp_path / "data"
    server = Server(data, policies)
    servers.append(server)
    stop = threading.Event()
    acked: list[str] = []

    def load() -> None:
        with MemLineageClient(server.address, timeout=10) as c:
            i = 0
            while not stop.is_set():
                c.record(f"w{i}", creator="tool:crawler", dependencies=[f"w{i - 1}"] if i else [])
                acked.append(f"w{i}")
                i += 1

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    try:
        deadline = time.monotonic() + 60
        while len(acked) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(acked) >= 100
        checked = cli("store", "check", str(data))
        assert checked.returncode == 0, checked.stderr
        m = re.search(r": ok, ([\d,]+) records? in 1 namespace,", checked.stdout)
        assert m and int(m.group(1).replace(",", "")) >= 100, checked.stdout
        dest = tmp_path / "backup"
        copied = cli("store", "backup", str(data), str(dest))
        assert copied.returncode == 0, copied.stderr
        at_backup = len(acked)
    finally:
        stop.set()
        loader.join(timeout=30)
    assert not loader.is_alive()
    assert f"backed up {data} into {dest}" in copied.stdout
    assert server.stop() == 0

    # The copy opens and checks clean, with the writes acknowledged before it began.
    assert cli("store", "check", str(dest)).returncode == 0
    copy = EmbeddedStore(dest)
    try:
        have = set(copy.get_many(NS, acked))
        assert set(acked[:100]) <= have and len(have) <= len(acked)
        assert len(have) >= 100 and at_backup >= 100
        # The copy is a store of its own: it takes writes.
        copy.record(MemoryRecord(id="after-restore", namespace=NS, creator_id="user:u"))
    finally:
        copy.close()
    # A second backup into the same place is refused, the first copy kept.
    again = cli("store", "backup", str(data), str(dest))
    assert again.returncode == 1 and "exists" in again.stderr
    assert cli("store", "check", str(dest)).returncode == 0
    missing = cli("store", "check", str(tmp_path / "nowhere"))
    assert missing.returncode == 1 and "no embedded store" in missing.stderr


@pytest.mark.any_runtime
@pytest.mark.parametrize("command", ["check", "backup"])
def test_store_commands_given_a_store_url_say_what_they_take(command: str, tmp_path: Path) -> None:
    """Before: "no embedded store in redis://... (no lineage.sqlite3)", as if the URL
    were a directory that lacked a file (an outside audit)."""
    url = "redis://127.0.0.1:6379/0"
    args = ["store", command, url] + ([str(tmp_path / "dest")] if command == "backup" else [])
    out = cli(*args)
    assert out.returncode == 2, out
    assert out.stderr.startswith(
        f"error: store {command} DIR takes an embedded store's data directory, not the "
        f"store URL {url!r}; a Redis store is checked and backed up by Redis's own tools"
    ), out.stderr
    assert "docs/operating.md" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "dest").exists()

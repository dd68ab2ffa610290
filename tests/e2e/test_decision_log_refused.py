"""A decision log that cannot be written (a full disk: `/dev/full` refuses every write
with ENOSPC) refuses decisions UNAVAILABLE with the reason, the path and what stays
changed, says so once in the sidecar's log (no traceback per call), and the services
that decide report NOT_SERVING until it takes lines again (PolicyAdmin, the liveness
probe's service, stays SERVING); since a line is written before its decision is
answered, no decision is answered unlogged, which a sidecar SIGKILLed under load also
shows."""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from memlineage.client import MemLineageClient, Unavailable
from memlineage.engine.log_verify import verify
from memlineage.grpc_api.server import SERVICE_NAMES
from support.serve_process import ServeProcess
from support.sidecar import BUNDLED_POLICIES

ENOSPC = "No space left on device"


def health_becomes(client: MemLineageClient, status: str, within: float = 10.0) -> float:
    """Seconds until the server's health ("") reads `status` (the sidecar checks every
    0.5 s); fails past `within`."""
    start = time.monotonic()
    while client.health() != status:
        assert time.monotonic() - start < within, f"health never became {status}"
        time.sleep(0.1)
    return time.monotonic() - start


def never(call: Callable[[], object]) -> None:
    with pytest.raises(Unavailable) as refused:
        call()
    assert refused.value.reason == "DECISION_LOG_UNAVAILABLE"


def test_a_full_disk_refuses_each_decision_unavailable_and_is_said_once() -> None:
    sidecar = ServeProcess(
        ["--policies", BUNDLED_POLICIES, "--decision-log", "/dev/full", "--sweep-interval", "0"]
    )
    try:
        with MemLineageClient(sidecar.address, timeout=10, retries=0) as client:
            with pytest.raises(Unavailable) as refused:
                client.record("m1", creator="user:alice", tags=["tea"])
            assert refused.value.reason == "DECISION_LOG_UNAVAILABLE"
            details = refused.value.details
            assert "the decision log (/dev/full) cannot be written" in details
            assert ENOSPC in details
            # the store write came before the log: the caller learns it stands
            assert "memory 'm1' is recorded" in details and "replay" in details

            for call in (
                lambda: client.check("read", "m1"),
                lambda: client.check("write", "m2"),
                lambda: client.filter_rank([("m1", 0.9), ("m3", 0.5)]),
            ):
                with pytest.raises(Unavailable) as refused:
                    call()
                assert refused.value.reason == "DECISION_LOG_UNAVAILABLE"
                assert "is recorded" not in refused.value.details
            # every decision would be refused: not ready; the process itself is alive
            health_becomes(client, "NOT_SERVING")
            assert client.health(SERVICE_NAMES[0]) == "NOT_SERVING"
            assert client.health(SERVICE_NAMES[1]) == "SERVING"
            time.sleep(1.5)  # a device cannot be probed: only a decision would tell
            assert client.health() == "NOT_SERVING"
            never(lambda: client.check("read", "m1"))
    finally:
        code = sidecar.stop()
    out = sidecar.rest()
    assert code == 0, out
    assert "Traceback" not in out, out
    assert out.count("cannot be written") == 1, out  # the first refusal, not every one
    assert "decisions are refused UNAVAILABLE until it can" in out
    assert out.count("health NOT_SERVING") == 1, out


def test_a_write_cut_short_by_the_file_size_limit_leaves_no_part_of_a_line(
    tmp_path: Path,
) -> None:
    """The sidecar's file size limit (RLIMIT_FSIZE, set from outside with prlimit) stops
    a line part way (EFBIG after a short write): the part written is cut back off,
    the decision is refused and health goes NOT_SERVING. Once the limit is lifted
    health is SERVING again before any decision is tried (a probe found room, writing
    nothing to the log), decisions are answered and logged again in one chain that
    `memlineage log verify` finds intact, one line per decision answered."""
    path = tmp_path / "decisions.log"
    sidecar = ServeProcess(
        ["--policies", BUNDLED_POLICIES, "--decision-log", str(path), "--sweep-interval", "0"]
    )
    pid = sidecar.proc.pid
    answered = 0
    try:
        with MemLineageClient(sidecar.address, timeout=10, retries=0) as client:
            client.record("m1", creator="user:alice", tags=["tea"])
            client.check("read", "m1")
            answered += 2
            size = path.stat().st_size
            line = size // 2  # two lines so far, of about the same length
            # room for a part of the next line only
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (size + line // 3, resource.RLIM_INFINITY))
            with pytest.raises(Unavailable) as refused:
                client.check("read", "m1")
            assert refused.value.reason == "DECISION_LOG_UNAVAILABLE"
            assert "File too large" in refused.value.details
            assert path.stat().st_size == size  # the part written is cut off again
            health_becomes(client, "NOT_SERVING")
            time.sleep(1.0)  # probed twice meanwhile: still no room
            assert client.health() == "NOT_SERVING"
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
            health_becomes(client, "SERVING")
            assert path.stat().st_size == size  # the probe wrote nothing to the log
            assert sorted(p.name for p in tmp_path.iterdir()) == [
                "decisions.log",
                "decisions.log.head",
            ]
            client.check("read", "m1")
            client.record("m2", creator="user:alice", dependencies=["m1"])
            answered += 2
    finally:
        assert sidecar.stop() == 0
    out = sidecar.rest()
    assert "Traceback" not in out, out
    assert "writable again (room for a line), after 1 refused writes" in out, out
    assert out.count("health NOT_SERVING") == 1 and out.count("health SERVING") == 1, out
    found = verify([str(path)])
    assert found.ok, found.describe()
    assert found.decisions == answered
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == answered and all(x.endswith(b"}\n") for x in lines)


@pytest.mark.parametrize("target", ["file", "stderr"])
def test_a_sidecar_killed_under_load_logged_every_decision_it_answered(
    tmp_path: Path, target: str
) -> None:
    """SIGKILL of a sidecar deciding for eight callers at once: every decision a caller
    got an answer for is in the log (each line is written before its decision is
    answered), the log ends with a whole line, and (a file) a sidecar started again
    on it continues the chain, which `log verify` finds intact. The default log,
    stderr, holds the same lines up to the kill."""
    import threading
    import time

    path = tmp_path / "decisions.log"
    log = str(path) if target == "file" else "-"
    args = ["--policies", BUNDLED_POLICIES, "--decision-log", log, "--sweep-interval", "0"]
    sidecar = ServeProcess(args)
    answered: list[str] = []
    stop = threading.Event()

    def caller(k: int) -> None:
        with MemLineageClient(sidecar.address, timeout=5, retries=0) as c:
            i = 0
            while not stop.is_set():
                try:
                    if i % 5 == 0:
                        got = c.record(f"m{k}-{i}", creator="user:alice").decision.decision_id
                    else:
                        got = c.check("read", f"m{k}-{i - i % 5}").decision_id
                except Exception:  # the sidecar was killed: this call got no answer
                    return
                answered.append(got)
                i += 1

    callers = [threading.Thread(target=caller, args=(k,)) for k in range(8)]
    for t in callers:
        t.start()
    deadline = time.monotonic() + 20
    while len(answered) < 300 and time.monotonic() < deadline:
        time.sleep(0.05)
    sidecar.kill()  # SIGKILL, mid-load
    stop.set()
    for t in callers:
        t.join(20)
    assert len(answered) >= 300
    if target == "stderr":  # the decision lines among the sidecar's output
        out = sidecar.rest()
        path.write_text("".join(x for x in out.splitlines(True) if x.startswith('{"seq":')))
    data = path.read_bytes()
    assert data.endswith(b"\n")  # whole lines only: each went out in one write
    logged = {json.loads(line)["decision_id"] for line in data.splitlines()}
    missing = [d for d in answered if d not in logged]
    assert not missing, f"{len(missing)} answered decisions are not in the log"
    found = verify([str(path)])
    assert found.ok, found.describe()
    if target == "stderr":
        return

    again = ServeProcess(args)  # continues the chain of the killed one
    try:
        with MemLineageClient(again.address, timeout=10, retries=0) as c:
            c.check("read", "m0-0")
    finally:
        assert again.stop() == 0
    found = verify([str(path)])
    assert found.ok, found.describe()
    assert found.decisions == len(logged) + 1

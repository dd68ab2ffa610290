"""The lineage store goes away: a sidecar on its own real redis-server, which the test
stops and restarts. Fail closed (the default): every RPC that needs the store is
UNAVAILABLE, and it recovers when Redis is back. Fail degraded: reads are DEGRADE
with the documented annotation, everything else DENY, writes UNAVAILABLE."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from memlineage.client import MemLineageClient, NotFound, Unavailable
from memlineage.config import Config
from memlineage.grpc_api.auth import TokenGrant
from memlineage.v1 import memlineage_pb2 as pb
from support.redis_servers import RedisServer, start_redis_server
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

DOWN_TEXT = "lineage store unavailable: provenance not verified"
CALL_TIMEOUT = 3.0  # a call on a dead store must answer well within this
TOKENS = (TokenGrant("tok", ("ns-out",), name="t"),)


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_redis_server(tmp_path / "redis")
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def sidecar_on(redis: RedisServer, fail_mode: str) -> Iterator[MemLineageClient]:
    config = Config(
        policy_dir=BUNDLED_POLICIES,
        store=redis.url,
        fail_mode=fail_mode,
        tokens=TOKENS,
        decision_log="off",
    )
    with (
        RunningSidecar(config) as s,
        MemLineageClient(s.address, token="tok", timeout=CALL_TIMEOUT, retries=0) as c,
    ):
        yield c


@contextmanager
def quick(what: str, limit: float = CALL_TIMEOUT) -> Iterator[None]:
    """The block must finish (answer or raise) within `limit` seconds."""
    started = time.monotonic()
    yield
    took = time.monotonic() - started
    assert took < limit, f"{what} took {took:.2f} s on a dead store"


def _drain(stream, outcome: list[BaseException]) -> None:
    try:
        for _ in stream:
            pass
    except BaseException as exc:
        outcome.append(exc)
    finally:
        stream.cancel()


def kinds(d: pb.Decision) -> list[str]:
    return [o.kind for o in d.obligations]


def test_fail_closed_is_unavailable_then_recovers(redis: RedisServer) -> None:
    with sidecar_on(redis, "closed") as c:
        assert c.record("pref", creator="user:alice").recorded
        assert c.check("read", "pref").effect == pb.EFFECT_ALLOW

        redis.stop()
        with quick("Check"), pytest.raises(Unavailable):
            c.check("read", "pref")
        with quick("act"), pytest.raises(Unavailable):
            c.check("act", ["pref"], action="book")
        with quick("FilterRank"), pytest.raises(Unavailable):
            c.filter_rank([("pref", 0.9)])
        with quick("Record"), pytest.raises(Unavailable):
            c.record("lost", creator="user:alice")
        with quick("UpdateStatus"), pytest.raises(Unavailable):
            c.revoke("pref")
        with quick("Explain"), pytest.raises(Unavailable):
            c.explain("pref")
        # a watch opened now ends with UNAVAILABLE instead of hanging
        outcome: list[BaseException] = []
        reader = threading.Thread(target=lambda: _drain(c.watch(), outcome), daemon=True)
        reader.start()
        reader.join(CALL_TIMEOUT)
        assert not reader.is_alive(), "a watch on a dead store hangs"
        assert [type(e) for e in outcome] == [Unavailable], outcome
        # the sidecar itself is alive: its health answers at once, and says the
        # store-dependent service is not serving (PolicyAdmin still is)
        deadline = time.monotonic() + 5.0
        while c.health() != "NOT_SERVING" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.health() == "NOT_SERVING"
        assert c.health("memlineage.v1.PolicyAdmin") == "SERVING"

        redis.start()  # same port and data directory (AOF)
        assert c.check("read", "pref").effect == pb.EFFECT_ALLOW
        deadline = time.monotonic() + 5.0  # health follows the store back, no restart
        while c.health() != "SERVING" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.health() == "SERVING"
        m = c.explain("pref").memory
        assert (m.status, m.version) == (pb.STATUS_ACTIVE, 1)  # the revoke never happened
        with pytest.raises(NotFound):
            c.explain("lost")  # nor the record
        assert c.record("lost", creator="user:alice").recorded


def test_fail_degraded_reads_degrade_the_rest_is_denied(redis: RedisServer) -> None:
    with sidecar_on(redis, "degraded") as c:
        c.record("pref", creator="user:alice")
        c.record("plan", creator="agent:planner", dependencies=["pref"])
        redis.stop()

        with quick("Check read"):
            read = c.check("read", "pref")
        assert read.effect == pb.EFFECT_DEGRADE
        annotate = [o for o in read.obligations if o.kind == "annotate"]
        assert [o.text for o in annotate] == [DOWN_TEXT]
        assert read.decision_id and list(read.memory_ids) == ["pref"]
        assert DOWN_TEXT in read.errors

        with quick("FilterRank"):
            ranked = c.filter_rank([("pref", 0.9), ("plan", 0.8)])
        assert [cand.decision.effect for cand in ranked.candidates] == [pb.EFFECT_DEGRADE] * 2
        assert all(cand.kept for cand in ranked.candidates)
        assert kinds(ranked.candidates[0].decision) == ["annotate"]

        for op, ids in (
            ("act", ["plan"]),
            ("update", "pref"),
            ("delete", "pref"),
            ("derive", "plan"),
        ):
            with quick(f"Check {op}"):
                d = c.check(op, ids, action="book" if op == "act" else "")
            assert d.effect == pb.EFFECT_DENY, op
            assert any(r.message == DOWN_TEXT for r in d.reasons), op

        with quick("Record"), pytest.raises(Unavailable):
            c.record("lost", creator="user:alice")

        # the CLI prints the sidecar's reason once (before: again as an `error` line)
        out = subprocess.run(
            [sys.executable, "-m", "memlineage", "check", "read", "pref", "--target", c.target],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "MEMLINEAGE_TOKEN": "tok"},
        )
        assert out.returncode == 0 and out.stdout.startswith("DEGRADE "), out
        errors = [line for line in out.stdout.splitlines() if line.startswith("  error ")]
        assert errors == [f"  error      <store-unavailable>: {DOWN_TEXT}"], out.stdout

        redis.start()
        assert c.check("read", "pref").effect == pb.EFFECT_ALLOW
        assert c.check("act", ["plan"], action="book").effect == pb.EFFECT_ALLOW
        with pytest.raises(NotFound):
            c.explain("lost")

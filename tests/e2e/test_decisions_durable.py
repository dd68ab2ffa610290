"""Decisions outlive the process that took them and are seen by every sidecar: a
real `memlineage serve --data-dir` restarted (SIGTERM, or SIGKILL after one flush
interval) still explains and takes Feedback on its earlier decisions; two sidecars
over one redis-server see each other's; the Redis stream stays capped."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import redis
from memlineage.client import MemLineageClient
from memlineage.config import Config
from memlineage.lineage.clock import ManualClock
from memlineage.v1 import memlineage_pb2 as pb
from support.memories import T0
from support.redis_servers import RedisServer
from support.serve_process import ServeProcess
from support.sidecar import BUNDLED_POLICIES, RunningSidecar


def Server(data: Path) -> ServeProcess:
    """`memlineage serve --data-dir` on the bundled policies."""
    return ServeProcess(["--policies", BUNDLED_POLICIES, "--data-dir", str(data)])


NS = "default"


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for s in started:
        s.kill()


def _decide(c: MemLineageClient) -> list[str]:
    """Three decisions on "dd-city" (a Record, two Checks); a DENY on "dd-guess". Newest first."""
    ids = [c.record("dd-city", creator="user:alice").decision.decision_id]
    ids.append(c.check("read", "dd-city").decision_id)
    ids.append(c.check("read", "dd-city", actor="agent:planner").decision_id)
    c.record("dd-guess", creator="reasoning:planner", confidence=0.3)
    deny = c.check("read", "dd-guess")
    assert deny.effect == pb.EFFECT_DENY
    return [deny.decision_id, *ids[::-1]]


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_serve_data_dir_explains_and_takes_feedback_after_a_restart(
    tmp_path: Path, servers: list[Server], how: str
) -> None:
    data = tmp_path / "data"
    first = Server(data)
    servers.append(first)
    with MemLineageClient(first.address, timeout=10) as c:
        deny, *city = _decide(c)
        before = list(c.explain("dd-city").decisions)
        assert [d.decision_id for d in before] == city  # 3 before
        assert c.explain("dd-guess").decisions[0].decision_id == deny
    if how == "sigterm":
        assert first.stop() == 0  # the final flush
    else:
        time.sleep(2.5)  # one access_flush_seconds (2 s): the loop wrote them
        first.kill()
    again = Server(data)
    servers.append(again)
    with MemLineageClient(again.address, timeout=10) as c:
        after = list(c.explain("dd-city").decisions)
        assert after == before  # 3 after: same ids, effects, reasons, times
        shown = c.explain("dd-guess").decisions[0]
        assert shown.decision_id == deny and shown.effect == pb.EFFECT_DENY
        assert list(shown.reasons) and shown.reasons[0].policy
        # Feedback names a decision of the process before and no memory: its memory.
        assert c.feedback(deny, [], success=False).updated == 1
        assert c.explain("dd-guess").memory.uses_failed == 1
    assert again.stop() == 0


def test_two_sidecars_over_one_redis_share_their_decisions(redis_server: RedisServer) -> None:
    redis_server.emptied()
    clock = ManualClock(T0)
    config = Config(
        policy_dir=BUNDLED_POLICIES,
        store=redis_server.url,
        access_flush_seconds=0.05,
        decision_retention=50,
    )
    with (
        RunningSidecar(config, clock) as a,
        RunningSidecar(config, clock) as b,
        MemLineageClient(a.address) as ca,
        MemLineageClient(b.address) as cb,
    ):
        deny, *city = _decide(ca)
        # A's loop writes them within a flush interval, possibly over two flushes:
        # wait until B shows every one of them.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            shown = [d.decision_id for d in cb.explain("dd-city").decisions]
            guessed = [d.decision_id for d in cb.explain("dd-guess").decisions]
            if shown == city and guessed[:1] == [deny]:
                break
            time.sleep(0.05)
        assert shown == city  # Explain on B shows A's decisions
        assert guessed[:1] == [deny]
        assert cb.feedback(deny, [], success=True).updated == 1  # A's id, on B
        assert ca.explain("dd-guess").memory.uses_ok == 1
        for _ in range(80):  # more than the retention
            ca.check("read", "dd-city")
        cb.check("read", "dd-city")
        ca.explain("dd-city")  # flushes A's queue
        cb.explain("dd-city")
        stream = redis.Redis.from_url(redis_server.url)
        try:
            assert stream.xlen(f"ml:{{{NS}}}:dec") == 50
            assert stream.hlen(f"ml:{{{NS}}}:dix") == 50
        finally:
            stream.close()
        assert len(cb.explain("dd-city", decisions=100).decisions) <= 50


def test_the_retention_is_configured(tmp_path: Path) -> None:
    config = replace(
        Config(policy_dir=BUNDLED_POLICIES, data_dir=str(tmp_path)), decision_retention=3
    )
    with RunningSidecar(config) as s, MemLineageClient(s.address) as c:
        c.record("m", creator="user:alice")
        for _ in range(5):
            c.check("read", "m")
        # the journal keeps no more per namespace than the store: the newest 3
        assert len(c.explain("m", decisions=20).decisions) == 3
        assert s.sidecar is not None
        store = s.sidecar.store
        assert store.decision_retention == 3
        assert len(store.kept_decisions(NS, "m", 20)) == 3

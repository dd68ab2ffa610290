"""The sidecar serves on several worker threads: Checks from many clients at once,
with writes between them, are each counted once and agree with decisions taken
afresh; Watch streams run on a pool of their own and never hold the workers that
unary calls need."""

from __future__ import annotations

import random
import threading
import time

import pytest
from memlineage.client import MemLineageClient
from memlineage.config import Config
from memlineage.engine.core import Engine
from memlineage.grpc_api.server import EMBEDDED_WORKERS
from memlineage.v1 import memlineage_pb2 as pb
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

NS = "default"
READERS, CALLS = 8, 250


@pytest.mark.parametrize("backend", ["embedded", "redis"])
def test_concurrent_checks_are_each_counted_and_exact(
    backend: str, request: pytest.FixtureRequest
) -> None:
    store = "embedded"
    if backend == "redis":
        store = request.getfixturevalue("redis_server").emptied()
    config = Config(policy_dir=BUNDLED_POLICIES, store=store, decision_log="off")
    with RunningSidecar(config) as s:
        assert s.sidecar is not None
        with MemLineageClient(s.address) as c:
            for i in range(40):
                creator = ("user:alice", "tool:web_search", "reasoning:planner")[i % 3]
                c.record(f"m{i}", creator=creator, confidence=0.2 + (i % 5) / 5)
        errors: list[BaseException] = []

        def reader(k: int) -> None:
            rng = random.Random(k)
            try:
                with MemLineageClient(s.address) as client:
                    for _ in range(CALLS):
                        client.check("read", f"m{rng.randrange(40)}")
            except BaseException as exc:  # reported below
                errors.append(exc)

        def writer() -> None:
            try:
                with MemLineageClient(s.address) as client:
                    for i in range(20):
                        client.record(f"late{i}", creator="user:alice", dependencies=[f"m{i}"])
                        if i % 5 == 0:
                            client.revoke(f"m{i + 1}", reason="corrected")
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=reader, args=(k,)) for k in range(READERS)]
        threads.append(threading.Thread(target=writer))
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        registry = s.sidecar.metrics.registry
        reads = sum(
            registry.get_sample_value(
                "memlineage_decisions_total", {"operation": "read", "effect": e}
            )
            or 0.0
            for e in ("allow", "deny", "degrade")
        )
        assert reads == READERS * CALLS  # every add kept, from every worker thread
        assert (
            registry.get_sample_value("memlineage_rpc_latency_seconds_count", {"method": "Check"})
            == READERS * CALLS
        )
        engine = s.sidecar.engine
        assert 0 < engine.reused <= READERS * CALLS
        # Quiet now: every answer equals a decision taken afresh on the same store.
        fresh = Engine(
            engine.store,
            engine.policies,
            clock=engine.clock,
            reuse_decisions=False,
            record_access=False,
        )
        with MemLineageClient(s.address) as c:
            for i in range(40):
                got = c.check("read", f"m{i}")
                want = fresh.check(NS, "read", [f"m{i}"], engine_actor(s))
                assert (
                    got.effect
                    == {
                        "allow": pb.EFFECT_ALLOW,
                        "deny": pb.EFFECT_DENY,
                        "degrade": pb.EFFECT_DEGRADE,
                    }[want.decision.effect]
                )
                assert got.compliance_score == want.decision.compliance_score


def engine_actor(s: RunningSidecar):
    """The actor a Check without one is decided for (the namespace's user)."""
    assert s.sidecar is not None
    return s.sidecar.service.default_actor(NS)


def test_watch_streams_do_not_hold_the_workers() -> None:
    """More open Watch streams than gRPC workers: unary calls are still answered."""
    with (
        RunningSidecar(Config(policy_dir=BUNDLED_POLICIES, decision_log="off")) as s,
        MemLineageClient(s.address, timeout=5) as c,
    ):
        streams = [c.watch(from_oldest=True) for _ in range(EMBEDDED_WORKERS * 3)]
        seen: list[str] = []

        def follow(stream) -> None:
            for event in stream:
                seen.append(event.memory_id)
                return

        followers = [threading.Thread(target=follow, args=(st,)) for st in streams]
        for t in followers:
            t.start()
        try:
            assert s.sidecar is not None
            deadline = time.monotonic() + 10
            # every stream has a thread of the Watch pool (the threads gauge), on either
            # runtime
            while s.pool_threads("memlineage-watch") < len(streams):
                assert time.monotonic() < deadline, "the streams did not all open"
                time.sleep(0.05)
            c.record("m", creator="user:alice")  # 5 s deadline: a free worker answers
            assert c.check("read", "m").effect == pb.EFFECT_ALLOW
            for t in followers:
                t.join(10)
            assert seen == ["m"] * len(streams)  # every stream live, each told
        finally:
            for stream in streams:
                stream.cancel()

"""SIGKILL of redis-server (AOF, appendfsync always) during concurrent revisions
through a real sidecar: every memory is left at one consistent version (its kept
versions are exactly the ones before it, its derivation links match its current
dependencies, its descendants were cascaded with it), every acknowledged revision is
there, and revising again after the restart converges. Bounded in time."""

from __future__ import annotations

import contextlib
import json
import threading
import time

import redis
from memlineage.client import FailedPrecondition, MemLineageClient, Unavailable
from memlineage.config import Config
from memlineage.grpc_api.auth import TokenGrant
from memlineage.lineage.clock import system_clock
from support.redis_servers import RedisServer
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

NS = "revfaults"
TOKENS = (TokenGrant("tok", (NS,), name="t"),)
DEADLINE = 5.0
WRITERS = 4
PARENTS = [f"p{i}" for i in range(4)]
MEMORIES = [f"m{t}" for t in range(WRITERS)] + ["shared"]
TAG = f"ml:{{{NS}}}"


def client(address: str) -> MemLineageClient:
    return MemLineageClient(address, token="tok", namespace=NS, timeout=DEADLINE, retries=0)


Acked = dict[tuple[str, int], list[str]]  # (memory, version) -> its dependencies


def reviser(
    address: str,
    mine: str,
    stop: threading.Event,
    acked: Acked,
    down: list[str],
    lock: threading.Lock,
) -> None:
    """Revise `mine` and, racing the others, `shared` onto changing parents."""
    with client(address) as c:
        versions = {mine: 1, "shared": 1}
        j = 0
        while not stop.is_set() and j < 500:
            j += 1
            target = "shared" if j % 3 == 0 else mine
            deps = [PARENTS[j % 4], PARENTS[(j + 1) % 4]][: 1 + j % 2]
            try:
                out = c.revise(
                    target,
                    expected_version=versions[target],
                    creator="agent:planner",
                    dependencies=deps,
                )
            except FailedPrecondition:
                with contextlib.suppress(Unavailable):
                    versions[target] = c.explain(target).memory.version
                continue
            except Unavailable:
                with lock:
                    down.append(target)
                continue
            assert out.applied
            versions[target] = out.memory.version
            with lock:
                acked[(target, out.memory.version)] = list(out.memory.dependencies)


def field(r: redis.Redis, key: str, name: str) -> str:
    value = r.hget(key, name)
    assert isinstance(value, str), (key, name)
    return value


def check_consistent(r: redis.Redis, acked: Acked) -> None:
    for m in MEMORIES:
        key = f"{TAG}:m:{m}"
        version = int(field(r, key, "V"))
        deps = (r.hget(key, "d") or "").split()
        kept = [json.loads(t) for t in r.lrange(f"{TAG}:vs:{m}", 0, -1)]
        kept_versions = [int(dict(zip(k[::2], k[1::2], strict=True))["V"]) for k in kept]
        # one revision, one kept version: nothing half-written
        assert kept_versions == list(range(1, version)), (m, version, kept_versions)
        for p in PARENTS:
            linked = m in r.lrange(f"{TAG}:d:{p}", 0, -1)
            assert linked == (p in deps), (m, p, deps)
        child = f"{TAG}:m:{m}-kid"
        if version > 1:  # cascaded in the same step as the first revision
            assert field(r, child, "S") == "pending_verification", m
            assert int(field(r, child, "V")) == 2, m
        else:
            assert field(r, child, "S") == "active", m
        for k, v in zip(kept, kept_versions, strict=True):
            got = (dict(zip(k[::2], k[1::2], strict=True)).get("d") or "").split()
            if (m, v) in acked:
                assert got == acked[(m, v)], (m, v)
        if (m, version) in acked:
            assert deps == acked[(m, version)], m
    lost = [(m, v) for m, v in acked if v > int(field(r, f"{TAG}:m:{m}", "V"))]
    assert not lost, lost


def test_sigkill_during_concurrent_revisions_leaves_one_version_each(server: RedisServer) -> None:
    started = time.monotonic()
    config = Config(
        policy_dir=BUNDLED_POLICIES, store=server.url, tokens=TOKENS, decision_log="off"
    )
    acked: Acked = {}
    down: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    with RunningSidecar(config, system_clock) as s:
        with client(s.address) as c:
            for p in PARENTS:
                assert c.record(p, creator="user:alice").recorded
            for m in MEMORIES:
                assert c.record(m, creator="agent:planner", dependencies=["p0"]).recorded
                assert c.record(f"{m}-kid", creator="agent:planner", dependencies=[m]).recorded
        threads = [
            threading.Thread(
                target=reviser, args=(s.address, f"m{t}", stop, acked, down, lock), daemon=True
            )
            for t in range(WRITERS)
        ]
        for th in threads:
            th.start()
        deadline = time.monotonic() + 20
        while len(acked) < 40:
            assert time.monotonic() < deadline, "revisions made no progress"
            time.sleep(0.01)
        server.stop(hard=True)  # SIGKILL mid-revision
        time.sleep(0.3)
        stop.set()
        for th in threads:
            th.join(DEADLINE * 3)
            assert not th.is_alive(), "a reviser hangs on a dead store"
        assert down, "no revision saw the store down"
        server.start()  # same port and directory: the AOF
        r = server.client(decode_responses=True, socket_timeout=5)
        try:
            check_consistent(r, acked)
            # revising again converges, and Explain shows the chain the store holds
            with client(s.address) as c:
                for m in MEMORIES:
                    current = c.explain(m)
                    assert len(current.versions) == current.memory.version - 1
                    out = c.revise(
                        m,
                        expected_version=current.memory.version,
                        creator="agent:planner",
                        dependencies=["p3"],
                    )
                    assert out.applied
                    acked[(m, out.memory.version)] = ["p3"]
            check_consistent(r, acked)
        finally:
            r.close()
    assert time.monotonic() - started < 60

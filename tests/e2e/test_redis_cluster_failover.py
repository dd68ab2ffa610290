"""`memlineage serve` on a Redis Cluster with one replica per master (node timeout
1 s), the master serving a namespace's slot SIGKILLed under load: every call during
the failover fails UNAVAILABLE with a message (never UNKNOWN or INTERNAL), the sidecar
serves again once the replica is promoted, without a restart (redis-py re-discovers
the topology), and what it acknowledged and Redis kept is whole (read back strictly
through the store, checked against the raw keys)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from memlineage.client import MemLineageClient, MemLineageError
from memlineage.lineage.errors import NotFoundError
from memlineage.store import open_store
from memlineage.store.redis_store import RedisStore
from memlineage.v1 import memlineage_pb2 as pb
from redis.cluster import key_slot
from support.redis_servers import RedisClusterHandle, start_redis_cluster, wait_slot_master
from support.serve_process import ServeProcess
from support.sidecar import BUNDLED_POLICIES

NS = "failover"
SLOT = key_slot(NS.encode())
TOKEN = "tok"
DEADLINE = 3.0  # the client's deadline: no call may wait longer, failover or not
FAILOVER_BOUND = 20.0  # node timeout 1 s: a replica takes over within a few seconds
SERVES_AGAIN_BOUND = 10.0  # from the new master on, until a Record is recorded again


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RedisClusterHandle]:
    """Three masters, one replica each, node timeout 1 s (a test's own: it kills one)."""
    handle = start_redis_cluster(tmp_path / "cluster", masters=3, replicas=1, node_timeout_ms=1000)
    try:
        yield handle
    finally:
        handle.stop()


def serve(cluster: RedisClusterHandle, *extra: str) -> ServeProcess:
    return ServeProcess(
        ["--store", cluster.url, "--policies", BUNDLED_POLICIES, *extra],
        env={"MEMLINEAGE_TOKENS": f"{TOKEN}={NS}"},
    )


def client(address: str) -> MemLineageClient:
    return MemLineageClient(address, token=TOKEN, namespace=NS, timeout=DEADLINE, retries=0)


@dataclass
class Load:
    """One agent's Record / Check / Revise / UpdateStatus loop on a thread: what the
    sidecar acknowledged, and every error it answered (when, which call, which)."""

    address: str
    recorded: set[str] = field(default_factory=set)
    revised: set[str] = field(default_factory=set)
    revoked: set[str] = field(default_factory=set)
    errors: list[tuple[float, str, MemLineageError]] = field(default_factory=list)
    last_ok: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with client(self.address) as c:
            j = 0
            while not self.stop.is_set():
                self.one(c, f"m{j}", (f"user:s{j % 5}", "city", f"c{j}"))
                j += 1

    def one(self, c: MemLineageClient, mid: str, claim: tuple[str, str, str]) -> None:
        if not self.call("Record", lambda: c.record(mid, creator="user:alice", claim=claim)):
            return
        self.recorded.add(mid)
        if not self.call("Check", lambda: c.check("read", mid)):
            return
        revise = c.revise
        if not self.call(
            "Revise",
            lambda: revise(mid, expected_version=1, creator="user:alice", claim=(*claim[:2], "x")),
        ):
            return
        self.revised.add(mid)
        if self.call("UpdateStatus", lambda: c.revoke(mid, expected_version=2)):
            self.revoked.add(mid)

    def call(self, name: str, fn: Callable[[], object]) -> bool:
        """True when the call was answered and did what it asked (a Record the
        policies denied, the write rate's, is False)."""
        at = time.monotonic()
        try:
            out = fn()
        except MemLineageError as err:
            self.errors.append((at, name, err))
            time.sleep(0.01)  # an agent backing off, not a busy loop on two cores
            return False
        self.last_ok = time.monotonic()
        return bool(getattr(out, "recorded", getattr(out, "applied", True)))


def check_store_whole(cluster: RedisClusterHandle, load: Load) -> set[str]:
    """Every memory Redis holds in the namespace reads back strictly (a half-written
    hash is StoreCorruptError), its kept versions are older than it, its
    dependencies and derivation lists name each other, its status history ends in its
    status; no cascade is left half-way. What the sidecar acknowledged is there, as
    acknowledged, unless lost whole (returned: async replication's window)."""
    store = open_store(cluster.url, socket_timeout=5, connect_timeout=5)
    assert isinstance(store, RedisStore)
    try:
        raw = store.client
        tag = f"ml:{{{NS}}}"
        master = cluster.master_of(SLOT)
        node = master.client(decode_responses=True, socket_timeout=5)
        try:
            keys = node.execute_command("CLUSTER", "GETKEYSINSLOT", SLOT, 100_000)
        finally:
            node.close()
        ids = {k[len(f"{tag}:m:") :] for k in keys if k.startswith(f"{tag}:m:")}
        assert ids, "nothing of the namespace on its new master"
        for key in keys:  # no list or version without its memory's hash
            for kind in ("d", "h", "vs"):
                if key.startswith(f"{tag}:{kind}:"):
                    assert key[len(f"{tag}:{kind}:") :] in ids, key
        for mid in ids:
            rec = store.get(NS, mid)  # strict: raises StoreCorruptError on a half record
            versions = store.versions(NS, mid)
            # each kept version older than the one after it, the first the memory's first
            kept = [v.version for v in versions]
            assert kept == sorted(set(kept), reverse=True), (mid, kept)
            assert not kept or (kept[0] < rec.version and kept[-1] == 1), (mid, kept)
            assert rec.status_history and rec.status_history[-1].to_status == rec.status, mid
            for dep in rec.dependencies:
                assert mid in store.get(NS, dep).derivations, (mid, dep)
            for kid in rec.derivations:
                assert mid in store.get(NS, kid).dependencies, (mid, kid)
        assert not raw.hgetall(f"{tag}:pc"), "a cascade left half-way"
        assert NS in store.namespaces()
        lost = load.recorded - ids
        for mid in load.revised - lost:
            assert len(store.versions(NS, mid)) == 1, mid
        for mid in load.revoked - lost:
            assert store.get(NS, mid).status == "revoked", mid
        return lost
    finally:
        store.close()


def test_master_killed_under_load_fails_over_and_serves_again(
    cluster: RedisClusterHandle,
) -> None:
    sidecar = serve(cluster)
    load = Load(sidecar.address)
    worker = threading.Thread(target=load.run, daemon=True)
    try:
        worker.start()
        deadline = time.monotonic() + 20
        while len(load.revoked) < 30:
            assert time.monotonic() < deadline, f"no progress before the kill: {load.errors[:3]}"
            time.sleep(0.02)
        master = cluster.master_of(SLOT)
        assert cluster.replicas_of(master), "the slot's master has no replica"
        killed = time.monotonic()
        master.stop(hard=True)  # SIGKILL mid-load
        promoted = wait_slot_master(cluster, SLOT, not_port=master.port, timeout=FAILOVER_BOUND)
        assert promoted.port != master.port
        failed_over = time.monotonic()
        recorded_before = len(load.recorded)
        while not (load.last_ok > failed_over and len(load.recorded) > recorded_before + 5):
            assert time.monotonic() < failed_over + SERVES_AGAIN_BOUND, (
                f"the sidecar does not serve again after the failover: {load.errors[-3:]}"
            )
            time.sleep(0.05)
    finally:
        load.stop.set()
        worker.join(DEADLINE * 3)
    try:
        assert not worker.is_alive(), "a call hangs past its deadline"
        assert any(at >= killed for at, _, _ in load.errors), "no call met the failover"
        for _, name, err in load.errors:
            # UNAVAILABLE with the store's reason and words; nothing else while it fails over
            assert err.code == grpc.StatusCode.UNAVAILABLE, (name, err)
            assert err.reason == "STORE_UNAVAILABLE" and "redis" in err.details, (name, err)
        with client(sidecar.address) as c:
            assert c.health() == "SERVING"
            assert c.check("read", sorted(load.revoked)[0]).effect != pb.EFFECT_ALLOW
        assert sidecar.proc.poll() is None, "the sidecar died"
    finally:
        sidecar.kill()
    lost = check_store_whole(cluster, load)
    # Redis replicates asynchronously: a Record acknowledged just before the kill may be
    # lost by the replica (test_an_acknowledged_write_is_lost_without_waiting pins it).
    # It is lost whole, never in part; on loopback at most the few calls in flight.
    assert len(lost) <= 2, lost
    for mid in lost:
        with pytest.raises(NotFoundError):
            open_store(cluster.url).get(NS, mid)

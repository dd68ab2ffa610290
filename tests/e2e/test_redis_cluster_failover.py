"""`memlineage serve` on a Redis Cluster with one replica per master (node timeout
1 s), the master serving a namespace's slot SIGKILLed under load: every call during
the failover fails UNAVAILABLE with a message (never UNKNOWN or INTERNAL), the sidecar
serves again once the replica is promoted, without a restart (redis-py re-discovers
the topology), and what it acknowledged and Redis kept is whole (read back strictly
through the store, checked against the raw keys). Redis replicates asynchronously: a
Record acknowledged just before the kill is lost by a lagging replica, unless the
sidecar waits for replicas (`redis_wait_replicas`), which then answers UNAVAILABLE
instead of acknowledging what no replica holds."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from memlineage.client import MemLineageClient, MemLineageError
from memlineage.config import Config, ConfigError
from memlineage.lineage.errors import AlreadyExistsError, NotFoundError, StoreUnavailableError
from memlineage.lineage.grants import GrantRecord
from memlineage.lineage.model import MemoryRecord
from memlineage.store import open_store
from memlineage.store.redis_store import RedisStore
from memlineage.v1 import memlineage_pb2 as pb
from redis.cluster import key_slot
from support.redis_servers import (
    RedisClusterHandle,
    start_redis_cluster,
    start_redis_server,
    wait_slot_master,
)
from support.serve_process import ServeProcess
from support.sidecar import BUNDLED_POLICIES

NS = "failover"
SLOT = key_slot(NS.encode())
TOKEN = "tok"
DEADLINE = 3.0  # the client's deadline: no call may wait longer, failover or not
FAILOVER_BOUND = 20.0  # node timeout 1 s: a replica takes over within a few seconds
SERVES_AGAIN_BOUND = 10.0  # from the new master on, until a Record is recorded again
UNACKED = "acknowledged by 0 of 1 replicas"


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterHandle]:
    """Three masters, one replica each, node timeout 1 s (this module's own: its tests
    kill a master)."""
    handle = start_redis_cluster(
        tmp_path_factory.mktemp("failover"), masters=3, replicas=1, node_timeout_ms=1000
    )
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def cluster(replicated: RedisClusterHandle) -> RedisClusterHandle:
    """The module's cluster emptied, a master a test killed back (as the replica of
    the one promoted), the namespace's master with a replica in sync."""
    for server in replicated.servers:
        if server.proc is None:
            server.start()  # its nodes.conf: it rejoins, as a replica
    wait_replicated(replicated)
    replicated.emptied()
    wait_replicated(replicated)
    return replicated


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
    dependencies and derivation lists name each other, its status history (when it
    changed) ends in its status; no cascade is left half-way. What the sidecar
    acknowledged is there, as acknowledged, unless lost whole (returned: async
    replication's window)."""
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
            if rec.status_history:  # changes of status only
                assert rec.status_history[-1].to_status == rec.status, mid
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
            # health follows its next ping of every primary (the promoted one now)
            deadline = time.monotonic() + SERVES_AGAIN_BOUND
            while c.health() != "SERVING":
                assert time.monotonic() < deadline, "health stays NOT_SERVING"
                time.sleep(0.1)
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


def lag_then_fail_over(cluster: RedisClusterHandle, write: Callable[[], object]) -> object:
    """Cut the slot's master from its replica (SIGSTOP the replica, CLIENT KILL its
    link), run `write` through the sidecar, SIGKILL the master, continue the replica
    and wait until it is promoted: a write the master applied and the replica never
    got, as asynchronous replication allows. Returns what `write` returned or raised."""
    master = cluster.master_of(SLOT)
    (replica,) = cluster.replicas_of(master)
    assert replica.proc is not None
    os.kill(replica.proc.pid, signal.SIGSTOP)
    try:
        link = master.client(decode_responses=True, socket_timeout=2)
        try:
            assert link.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
        finally:
            link.close()
        try:
            outcome: object = write()
        except MemLineageError as err:
            outcome = err
        master.stop(hard=True)
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)
    promoted = wait_slot_master(cluster, SLOT, not_port=master.port, timeout=FAILOVER_BOUND)
    assert promoted.port == replica.port
    return outcome


def until_answered(call: Callable[[], object], final: str = "") -> object:
    """`call` again while the sidecar answers UNAVAILABLE (its client finds the new
    master; an answer with `final` in its details ends it), within SERVES_AGAIN_BOUND;
    what it finally returned or raised."""
    deadline = time.monotonic() + SERVES_AGAIN_BOUND
    while True:
        try:
            return call()
        except MemLineageError as err:
            if err.code != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                return err
            if final and final in err.details:
                return err
        time.sleep(0.1)


def test_an_acknowledged_record_is_lost_by_a_lagging_replica_without_waiting(
    cluster: RedisClusterHandle,
) -> None:
    """The window docs/operating.md states, measured: by default a Record the master
    applied is answered at once, and the replica promoted without it has never heard
    of it."""
    sidecar = serve(cluster)
    try:
        with client(sidecar.address) as c:
            assert c.record("kept", creator="user:alice").recorded
            wait_replicated(cluster)
            out = lag_then_fail_over(cluster, lambda: c.record("lost", creator="user:alice"))
            assert isinstance(out, pb.RecordResponse) and out.recorded  # acknowledged...
            assert until_answered(lambda: c.explain("kept").memory.id) == "kept"
            gone = until_answered(lambda: c.explain("lost"))
            assert isinstance(gone, MemLineageError), gone  # ...and lost
            assert gone.code == grpc.StatusCode.NOT_FOUND
    finally:
        sidecar.kill()


def test_waiting_for_a_replica_acknowledges_only_what_the_replica_holds(
    cluster: RedisClusterHandle,
) -> None:
    """`--redis-wait-replicas 1`: the Record the replica never got is answered
    UNAVAILABLE, naming the replicas, not recorded=True; what was acknowledged
    survives the failover. The promoted master has no replica left: writes are
    UNAVAILABLE (reads serve) until the old master is back as its replica."""
    sidecar = serve(cluster, "--redis-wait-replicas", "1", "--redis-wait-timeout", "0.3")
    try:
        with client(sidecar.address) as c:
            assert c.record("kept", creator="user:alice").recorded
            assert c.revise("kept", expected_version=1, creator="user:alice").applied
            out = lag_then_fail_over(cluster, lambda: c.record("unsure", creator="user:alice"))
            assert isinstance(out, MemLineageError), out
            assert out.code == grpc.StatusCode.UNAVAILABLE and out.reason == "STORE_UNAVAILABLE"
            assert UNACKED in out.details, out.details
            # alone, the new master applies a write and cannot have it acknowledged
            alone = until_answered(lambda: c.record("alone", creator="user:alice"), UNACKED)
            assert isinstance(alone, MemLineageError), alone
            assert alone.code == grpc.StatusCode.UNAVAILABLE
            assert UNACKED in alone.details, alone.details
            kept = until_answered(lambda: c.explain("kept").memory)
            assert isinstance(kept, pb.Memory) and kept.version == 2, kept
            assert c.check("read", "kept").effect == pb.EFFECT_ALLOW
            old = next(s for s in cluster.servers if s.proc is None)
            old.start()  # back with its nodes.conf: a replica of the new master
            wait_replicated(cluster)
            again = until_answered(lambda: c.record("again", creator="user:alice"))
            assert isinstance(again, pb.RecordResponse) and again.recorded, again
        assert sidecar.proc.poll() is None, "the sidecar died"
    finally:
        sidecar.kill()
    assert not check_store_whole(cluster, Load(sidecar.address, recorded={"kept", "again"}))


def wait_replicated(cluster: RedisClusterHandle) -> None:
    """Until the slot's master has a replica in sync with it (WAIT on its own link
    after a write of its own)."""
    deadline = time.monotonic() + FAILOVER_BOUND
    while True:
        master = cluster.master_of(SLOT)
        c = master.client(decode_responses=True, socket_timeout=2)
        try:
            c.set(f"probe:{{{NS}}}", "1")
            if c.execute_command("WAIT", 1, 200) >= 1:
                c.delete(f"probe:{{{NS}}}")
                c.execute_command("WAIT", 1, 200)
                return
        finally:
            c.close()
        assert time.monotonic() < deadline, "the slot's master has no replica in sync"


def test_waiting_on_one_redis_and_its_replica(tmp_path: Path) -> None:
    """The same wait on a standalone Redis (one pipeline, one connection): answered
    while the replica takes the writes; with the replica stopped, a Record is
    UNAVAILABLE after the wait, applied on the master but never acknowledged; a
    grant's use too. A refusal wrote nothing and is answered as it is."""
    master = start_redis_server(tmp_path / "master", extra_args=("--repl-diskless-sync-delay", "0"))
    replica = start_redis_server(
        tmp_path / "replica", extra_args=("--replicaof", master.host, str(master.port))
    )
    try:
        store = open_store(master.url, wait_replicas=1, wait_timeout=0.3)
        try:
            deadline = time.monotonic() + FAILOVER_BOUND
            while replica.client().info("replication").get("master_link_status") != "up":
                assert time.monotonic() < deadline, "the replica never synced"
                time.sleep(0.05)
            store.record(memory("a"))
            grant = GrantRecord(
                id="g", namespace=NS, issuer="user:alice", actions=("send",), memory_id="a"
            )
            store.put_grant(grant, now=1.0)
            assert replica.client(decode_responses=True).hget(f"ml:{{{NS}}}:m:a", "V") == "1"
            assert replica.proc is not None
            os.kill(replica.proc.pid, signal.SIGSTOP)
            try:
                with pytest.raises(StoreUnavailableError, match="0 of 1 replicas within 300 ms"):
                    store.record(memory("b"))
                with pytest.raises(StoreUnavailableError, match="0 of 1 replicas"):
                    store.use_grants(NS, ["g"], now=2.0)  # a use a failover could undo
                # a refusal wrote nothing: answered as such, not UNAVAILABLE after the wait
                assert not store.use_grants(NS, ["no-such-grant"], now=2.0)
                with pytest.raises(AlreadyExistsError):
                    store.record(
                        MemoryRecord(id="a", namespace=NS, creator_kind="agent", creator_id="x")
                    )
            finally:
                os.kill(replica.proc.pid, signal.SIGCONT)
            assert master.client().exists(f"ml:{{{NS}}}:m:b")  # applied, not acknowledged
        finally:
            store.close()
    finally:
        replica.stop()
        master.stop()


def memory(mid: str) -> MemoryRecord:
    return MemoryRecord(id=mid, namespace=NS, creator_kind="user", creator_id="alice")


def test_a_wait_longer_than_the_socket_timeout_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"redis_wait_timeout \(1 s\) must be below"):
        Config(store="redis://h:1/0", redis_wait_replicas=1, redis_wait_timeout=1.0).validated()
    Config(store="redis://h:1/0", redis_wait_timeout=1.0).validated()  # no wait: no matter
    with pytest.raises(ValueError, match="must be below the socket timeout"):
        open_store("redis://127.0.0.1:1/0", wait_replicas=1, wait_timeout=2.0)


def test_a_decision_kept_before_a_failover_is_not_reused_after_it(
    cluster: RedisClusterHandle,
) -> None:
    """A repeated Check is answered from the decision kept under the namespace's write
    counter. A failover that lost one write took the counter back one step, and the
    next write (a revoke of the very memory) moved it forward to the value the kept
    ALLOW was taken under: the revoked memory was ALLOWed, by this sidecar only, until
    another write. The counter moves by random steps: it never comes back there."""
    sidecar = serve(cluster)
    try:
        with client(sidecar.address) as c:
            for mid in ("x", "other"):
                assert c.record(mid, creator="user:alice").recorded
            wait_replicated(cluster)

            def lost_write_then_kept_allow() -> object:
                assert c.revoke("other").applied  # lost with the master
                return [c.check("read", "x").effect for _ in range(2)]  # the second: kept

            kept = lag_then_fail_over(cluster, lost_write_then_kept_allow)
            assert kept == [pb.EFFECT_ALLOW, pb.EFFECT_ALLOW]
            gone = until_answered(lambda: c.explain("other").memory.status)
            assert gone == pb.STATUS_ACTIVE, gone  # the revoke was lost
            assert c.revoke("x").applied
            assert c.explain("x").memory.status == pb.STATUS_REVOKED
            assert c.check("read", "x").effect == pb.EFFECT_DENY
    finally:
        sidecar.kill()


def test_a_watch_past_events_a_failover_lost_is_told_to_resync(
    cluster: RedisClusterHandle,
) -> None:
    """A Watch saw the event of a Record the failover then lost. Resumed from its
    cursor once later events exist, it went on after them as if the lost one were
    still the store's (the resumed read only compared the cursor with the log's end):
    now it is CURSOR_EXPIRED, as a cursor ahead of the log is, and the watcher
    re-syncs (the next event names its predecessor, which is not the cursor)."""
    sidecar = serve(cluster)
    try:
        with client(sidecar.address) as c:
            assert c.record("a", creator="user:alice").recorded
            wait_replicated(cluster)

            def lost_and_seen() -> object:
                assert c.record("lost", creator="user:alice").recorded
                with c.watch(from_oldest=True) as stream:
                    for event in stream:
                        if event.memory_id == "lost":
                            return event.cursor
                raise AssertionError("no event for the lost Record")

            cursor = lag_then_fail_over(cluster, lost_and_seen)
            assert isinstance(cursor, str) and cursor
            later = until_answered(lambda: c.record("later", creator="user:alice"))
            assert isinstance(later, pb.RecordResponse) and later.recorded, later
            with c.watch(cursor=cursor) as stream, pytest.raises(MemLineageError) as refused:
                next(stream)
            assert refused.value.reason == "CURSOR_EXPIRED", refused.value
            assert "not in this namespace's log any more" in refused.value.details
    finally:
        sidecar.kill()

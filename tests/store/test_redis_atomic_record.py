"""One Record is one atomic store step (`LineageStore.record_claim`): the memory, its
claim-group comparison, the supersession of the claim's old holder with the cascade it
starts, and the rate counter; an identical retry answers the original outcome and writes
nothing, another memory under the id is ALREADY_EXISTS. On embedded, Redis and Cluster;
the last test makes Redis apply a Record after its client gave up (SIGSTOP)."""

from __future__ import annotations

import os
import signal
import time
from functools import partial

import pytest
import redis
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.engine.snapshot import calls_counter
from memlineage.lineage import AlreadyExistsError, NotFoundError, StoreUnavailableError
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import Status
from memlineage.store import LineageStore
from memlineage.store.base import ClaimMovedError, record_digest
from memlineage.store.redis_store import RedisStore
from redis.backoff import NoBackoff
from redis.retry import Retry
from support.memories import NOW, memory
from support.redis_servers import RedisServer
from support.sidecar import BUNDLED_POLICIES

NS = "atomic"
mem = partial(memory, ns=NS)
CITY = {"subject": "user:1", "attribute": "city"}


def lineage(store: LineageStore) -> None:
    store.record(mem("a", value="Paris", **CITY))
    store.record(mem("b", "a"))
    store.record(mem("c", "b"))


def test_record_claim_supersedes_cascades_and_counts(store: LineageStore) -> None:
    lineage(store)
    out = store.record_claim(
        mem("a2", value="Rome", **CITY), now=NOW, supersede="a", count="calls:user:alice"
    )
    assert (out.superseded_id, out.affected, out.replayed) == ("a", ("b", "c"), False)
    assert out.memory.id == "a2" and out.memory.status == Status.ACTIVE
    old = store.get(NS, "a")
    assert (old.status, old.successor) == (Status.SUPERSEDED, "a2")
    assert [store.get(NS, i).status for i in ("b", "c")] == [Status.PENDING_VERIFICATION] * 2
    assert store.count(NS, "calls:user:alice", 60, now=NOW) == 1
    current = store.current_claim(NS, "user:1", "city")
    assert current is not None and current.id == "a2"
    types = [e.type for e in store.events(NS)[0]]
    assert types[-3:] == ["recorded", "status_changed", "cascaded"]


def test_identical_retry_replays_the_outcome_and_writes_nothing(store: LineageStore) -> None:
    lineage(store)
    proposed = mem("a2", value="Rome", **CITY)
    store.record_claim(proposed, now=NOW, supersede="a", count="calls:user:alice")
    events = store.events(NS)[0]
    again = store.record_claim(proposed, now=NOW + 5, supersede="a", count="calls:user:alice")
    assert (again.superseded_id, again.affected, again.replayed) == ("a", ("b", "c"), True)
    assert again.memory.id == "a2"
    assert store.events(NS)[0] == events  # nothing written: no event
    assert store.count(NS, "calls:user:alice", 60, now=NOW + 5) == 1  # counted once
    # another memory under the id, and the plain record(), stay ALREADY_EXISTS
    with pytest.raises(AlreadyExistsError):
        store.record_claim(mem("a2", value="Oslo", **CITY), now=NOW)
    with pytest.raises(AlreadyExistsError):
        store.record_claim(mem("a2", value="Rome", creator_id="agent:x", **CITY), now=NOW)
    with pytest.raises(AlreadyExistsError):
        store.record(proposed, now=NOW)


def test_a_moved_claim_writes_nothing(store: LineageStore) -> None:
    lineage(store)
    store.record_claim(mem("a2", value="Rome", **CITY), now=NOW, supersede="a")
    events = store.events(NS)[0]
    with pytest.raises(ClaimMovedError) as caught:
        store.record_claim(
            mem("a3", value="Oslo", **CITY), now=NOW, supersede="a", count="calls:user:alice"
        )
    assert caught.value.holder == "a2"
    with pytest.raises(ClaimMovedError):
        store.record_claim(mem("a3", value="Oslo", **CITY), now=NOW, holder=None)
    with pytest.raises(NotFoundError):
        store.get(NS, "a3")
    assert store.events(NS)[0] == events
    assert store.count(NS, "calls:user:alice", 60, now=NOW) == 0


def test_engine_retry_of_a_record_answers_its_first_outcome(store: LineageStore) -> None:
    clock = ManualClock(NOW)
    engine = Engine(store, PolicyHolder(BUNDLED_POLICIES), clock=clock, record_access=False)
    engine.record(mem("a", value="Paris", **CITY))
    engine.record(mem("b", "a", creator_id="agent:planner", creator_kind="agent"))
    first = engine.record(mem("a2", value="Rome", **CITY))
    assert (first.recorded, first.superseded_id, first.affected_ids) == (True, "a", ("b",))
    clock.advance(3)
    retry = engine.record(mem("a2", value="Rome", **CITY))  # no created_at: a retry
    assert (retry.recorded, retry.superseded_id, retry.affected_ids) == (True, "a", ("b",))
    assert retry.memory is not None and retry.memory.created_at == NOW
    assert store.count(NS, calls_counter("user:alice"), 60, now=clock()) == 2  # a, a2
    with pytest.raises(AlreadyExistsError):
        engine.record(mem("a2", value="Lima", **CITY))


def test_digest_covers_the_proposal() -> None:
    a = mem("x", value="1", created_at=NOW, **CITY)
    assert record_digest(a) == record_digest(mem("x", value="1", created_at=NOW, **CITY))
    assert record_digest(a) != record_digest(mem("x", value="2", created_at=NOW, **CITY))
    assert record_digest(a) != record_digest(mem("x", value="1", created_at=NOW + 1, **CITY))
    assert record_digest(a, with_created_at=False) == record_digest(
        mem("x", value="1", created_at=NOW + 1, **CITY), with_created_at=False
    )


class StopBeforeScripts(redis.Connection):
    """A real connection that, when armed, stops the redis-server (SIGSTOP) right
    before it sends a script: the script waits in the socket buffer while the client
    times out, and runs once the server continues."""

    stop_pid: int | None = None

    def send_command(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        pid = StopBeforeScripts.stop_pid
        if pid is not None and args and args[0] == "EVALSHA":
            StopBeforeScripts.stop_pid = None
            os.kill(pid, signal.SIGSTOP)
        return super().send_command(*args, **kwargs)


def test_a_record_applied_after_its_client_gave_up_is_replayed(redis_server: RedisServer) -> None:
    """The client times out on the RECORD script (UNAVAILABLE, within its socket
    timeout) and the server applies it afterwards: the retry answers the outcome it
    had (the supersession and its cascade), not ALREADY_EXISTS."""
    redis_server.emptied()
    assert redis_server.proc is not None
    pid = redis_server.proc.pid
    pool = redis.ConnectionPool(
        host=redis_server.host,
        port=redis_server.port,
        decode_responses=True,
        socket_timeout=0.5,
        retry=Retry(NoBackoff(), 0),
        connection_class=StopBeforeScripts,
    )
    store = RedisStore(redis.Redis(connection_pool=pool), clock=ManualClock(NOW))
    admin = redis_server.client(decode_responses=True, socket_timeout=5)
    try:
        lineage(store)
        proposed = mem("a2", value="Rome", **CITY)
        StopBeforeScripts.stop_pid = pid
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError):
            store.record_claim(proposed, now=NOW, supersede="a", count="calls:user:alice")
        assert time.monotonic() - started < 1.5  # the socket timeout
        os.kill(pid, signal.SIGCONT)
        assert admin.exists(f"ml:{{{NS}}}:m:a2")  # applied after the client gave up
        again = store.record_claim(proposed, now=NOW + 1, supersede="a", count="calls:user:alice")
        assert (again.replayed, again.superseded_id, again.affected) == (True, "a", ("b", "c"))
        assert store.get(NS, "a").status == Status.SUPERSEDED
        assert store.count(NS, "calls:user:alice", 60, now=NOW + 1) == 1
    finally:
        StopBeforeScripts.stop_pid = None
        os.kill(pid, signal.SIGCONT)
        admin.close()
        store.close()

"""`grpc_runtime = "aio"`: what differs from the synchronous server. Everything the
served tests check of the sidecar is run on this runtime too (scripts/test.sh runs
them again with MEMLINEAGE_GRPC_RUNTIME=aio); here: which calls stay on the event
loop, that the loop is never held by what waits, and the setting itself."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from memlineage.client import MemLineageClient
from memlineage.config import Config, ConfigError
from memlineage.grpc_api.aio_server import inline_methods
from memlineage.v1 import memlineage_pb2 as pb
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

AIO = Config(policy_dir=BUNDLED_POLICIES, decision_log="off", grpc_runtime="aio")
ML = "/memlineage.v1.MemLineage/"
ADMIN = "/memlineage.v1.PolicyAdmin/"


def test_the_setting_takes_sync_or_aio_only() -> None:
    assert Config().grpc_runtime == "sync"
    assert Config(grpc_runtime="aio").validated().grpc_runtime == "aio"
    with pytest.raises(ConfigError, match=r"grpc_runtime must be one of \('sync', 'aio'\)"):
        Config(grpc_runtime="trio").validated()


def test_what_waits_leaves_the_loop() -> None:
    assert inline_methods(waits_on_network=True) == ()
    in_memory = inline_methods(waits_on_network=False)
    assert {"Check", "FilterRank", "Record"} <= set(in_memory)
    assert not {"UpdateStatus", "Revise", "Object", "Watch"} & set(in_memory)


def test_decisions_are_answered_on_the_loop_and_cascades_on_threads() -> None:
    """On the embedded store in memory, Checks, FilterRanks and Records start no
    thread (no hand-off per call, the runtime's point); an UpdateStatus (a cascade
    that may walk a whole lineage) runs on the pool."""
    with RunningSidecar(AIO) as s, MemLineageClient(s.address) as c:
        c.record("fact", creator="user:alice")
        c.record("plan", creator="agent:planner", dependencies=["fact"])
        for _ in range(20):
            c.check("read", "plan")
        c.filter_rank([("fact", 0.5), ("plan", 0.9)])
        assert s.pool_threads("memlineage-grpc") == 0
        c.revoke("fact", reason="wrong")
        assert s.pool_threads("memlineage-grpc") == 1
        assert c.check("read", "fact").effect == pb.EFFECT_DENY
        assert c.check("read", "plan").effect == pb.EFFECT_DEGRADE  # the cascade reached it


def test_watch_streams_waiting_on_the_store_do_not_hold_the_loop() -> None:
    """Each Watch step waits in the store up to a poll (0.5 s) on a thread of its own
    pool: Checks are answered meanwhile (on the loop, 8 streams would hold it nearly
    always: 50 Checks would take about 25 s)."""
    with RunningSidecar(AIO) as s, MemLineageClient(s.address) as c:
        c.record("fact", creator="user:alice")
        channel = grpc.insecure_channel(s.address)
        watch = channel.unary_stream(ML + "Watch")
        streams = [
            watch(pb.WatchRequest(namespace="default").SerializeToString(), timeout=30)
            for _ in range(8)
        ]
        try:
            started = time.monotonic()
            for _ in range(50):
                c.check("read", "fact")
            assert time.monotonic() - started < 10  # each would wait a Watch poll
            assert s.pool_threads("memlineage-watch") >= 8
        finally:
            for stream in streams:
                stream.cancel()
            channel.close()


def test_an_abort_keeps_its_trailers_on_aio() -> None:
    """A refusal raised by the synchronous servicer reaches the caller with its status,
    details and the error code and field in the trailing metadata."""
    with RunningSidecar(AIO) as s:
        channel = grpc.insecure_channel(s.address)
        try:
            with pytest.raises(grpc.RpcError) as err:
                channel.unary_unary(ML + "Check")(
                    pb.CheckRequest(operation=pb.OPERATION_READ).SerializeToString(), timeout=10
                )
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert err.value.details() == "memory_id: must not be empty"
            trailers = dict(err.value.trailing_metadata())
            assert trailers["memlineage-error-field"] == "memory_id"
            assert trailers["memlineage-error-code"]
        finally:
            channel.close()


def _never(stop: threading.Event) -> Iterator[bytes]:
    stop.wait(30)  # sends nothing until the test ends
    yield b""


def test_calls_that_never_send_their_request_hold_no_thread() -> None:
    """Sixteen calls held open without their request (Check, Record, an admin call):
    whole calls are answered at once and no thread was started for the held ones (on
    the synchronous server each holds a thread: tests/grpc_api/test_call_pool.py)."""
    with RunningSidecar(AIO) as s, MemLineageClient(s.address, timeout=5) as c:
        channel = grpc.insecure_channel(s.address)
        stop = threading.Event()
        held = [ML + "Check"] * 10 + [ML + "Record"] * 4 + [ADMIN + "ListPolicies"] * 2
        calls = [
            channel.stream_unary(m, request_serializer=None, response_deserializer=None).future(
                _never(stop), timeout=25
            )
            for m in held
        ]
        try:
            time.sleep(0.5)
            c.record("m1", creator="user:alice")
            assert c.check("read", "m1").effect == pb.EFFECT_ALLOW
            assert not any(call.done() for call in calls)  # still held, not refused
            assert s.pool_threads("memlineage-grpc") == 0
        finally:
            stop.set()
            for call in calls:
                call.cancel()
            channel.close()


def test_while_another_thread_holds_the_store_the_loop_stays_free() -> None:
    """A compaction of a large store (or a cascade, a sweep batch) holds the embedded
    store for up to seconds. A Check that comes meanwhile runs on a thread, not on the
    loop: health is answered at once while the Check waits for the store, and the
    Check is answered once it is free (inline, it would hold the loop, and health
    with it, until then)."""
    with RunningSidecar(AIO) as s, MemLineageClient(s.address, timeout=10) as c:
        assert s.sidecar is not None
        store = s.sidecar.store
        c.record("fact", creator="user:alice")
        assert not store.busy()
        held, release = threading.Event(), threading.Event()

        def hold() -> None:  # as a long compaction does (`EmbeddedStore.compact`)
            with store._lock:  # type: ignore[attr-defined]  # the embedded store's lock
                held.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert held.wait(5) and store.busy()
            channel = grpc.insecure_channel(s.address)
            check = channel.unary_unary(ML + "Check").future(
                pb.CheckRequest(operation=pb.OPERATION_READ, memory_id="fact").SerializeToString(),
                timeout=10,
            )
            time.sleep(0.2)  # the Check has come and waits for the store
            assert not check.done()
            with MemLineageClient(s.address, timeout=1, retries=0) as probe:
                assert probe.health() == "SERVING"
        finally:
            release.set()
            holder.join(10)
        assert pb.CheckResponse.FromString(check.result(10)).decision.effect == pb.EFFECT_ALLOW
        channel.close()

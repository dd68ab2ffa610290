"""Unary calls that never send their request, against a real sidecar on the synchronous
server (embedded store, `EMBEDDED_WORKERS` workers): they hold threads the pool grows for them, not
the workers that serve whole calls (before: four such calls made every other call run
to its deadline). On grpc.aio such a call holds no thread: test_aio_runtime.py."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from memlineage.client import MemLineageClient, ResourceExhausted
from memlineage.grpc_api.call_pool import STUCK_SECONDS, CallPool
from memlineage.grpc_api.server import EMBEDDED_WORKERS
from memlineage.v1 import memlineage_pb2 as pb
from prometheus_client import generate_latest
from support.sidecar import RunningSidecar

ML = "/memlineage.v1.MemLineage/"
ADMIN = "/memlineage.v1.PolicyAdmin/"


def _pool(running: RunningSidecar) -> CallPool:
    assert running.sidecar is not None and running.sidecar.served.calls is not None
    return running.sidecar.served.calls


def _never(stop: threading.Event) -> Iterator[bytes]:
    stop.wait(30)  # sends nothing until the test ends
    yield b""


def _open_without_request(
    channel: grpc.Channel, methods: list[str], stop: threading.Event
) -> list[grpc.Future]:
    calls = []
    for method in methods:
        idle = channel.stream_unary(method, request_serializer=None, response_deserializer=None)
        calls.append(idle.future(_never(stop), timeout=25))
    return calls


def test_whole_calls_are_served_while_many_calls_never_send_their_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Sixteen calls held open (Check, Record, an admin RPC) on a four-worker sidecar:
    a Record and a Check of it are answered at once, the pool grew for the held calls
    and said so once per step, and once they end the sidecar serves as before."""
    caplog.set_level(logging.WARNING, logger="memlineage.server")
    with RunningSidecar(pinned=True) as running:
        pool = _pool(running)
        assert pool.workers == EMBEDDED_WORKERS and pool.threads <= EMBEDDED_WORKERS
        channel = grpc.insecure_channel(running.address)
        client = MemLineageClient(running.address, timeout=5)
        stop = threading.Event()
        held = [ML + "Check"] * 10 + [ML + "Record"] * 4 + [ADMIN + "ListPolicies"] * 2
        calls = _open_without_request(channel, held, stop)
        try:
            time.sleep(STUCK_SECONDS * 3)  # every worker holds one of them by now
            started = time.monotonic()
            client.record("m1", creator="user:alice")
            assert client.check("read", "m1").effect == pb.EFFECT_ALLOW
            assert time.monotonic() - started < 3.0
            assert pool.threads >= len(held) + 1  # one per held call, and one that served
            assert pool.threads <= len(held) + 2 * EMBEDDED_WORKERS
            assert not any(call.done() for call in calls)  # still held, not refused
            time.sleep(STUCK_SECONDS * 2)  # the ones taken last have waited long enough too
            assert running.sidecar is not None
            scraped = generate_latest(running.sidecar.metrics.registry).decode()
            assert f'memlineage_grpc_calls_held{{pool="memlineage-grpc"}} {len(held)}.0' in scraped
            assert f'memlineage_grpc_threads{{pool="memlineage-grpc"}} {pool.threads}.0' in scraped
            assert 'memlineage_grpc_calls_held{pool="memlineage-health"} 0.0' in scraped
        finally:
            stop.set()
            for call in calls:
                call.cancel()
        grew = [r.getMessage() for r in caplog.records if "waited over" in r.getMessage()]
        assert grew and all("for their request" in line for line in grew)
        for _ in range(20):  # whole calls after the held ones ended
            assert client.check("read", "m1").effect == pb.EFFECT_ALLOW
        deadline = time.monotonic() + 10  # the cancelled calls' threads let go of them
        while pool.held and time.monotonic() < deadline:
            time.sleep(0.05)
        scraped = generate_latest(running.sidecar.metrics.registry).decode()
        assert 'memlineage_grpc_calls_held{pool="memlineage-grpc"} 0.0' in scraped
        client.close()
        channel.close()


LOAD = """
import sys
from concurrent.futures import ThreadPoolExecutor
from memlineage.client import MemLineageClient
with MemLineageClient(sys.argv[1], timeout=10) as client:
    with ThreadPoolExecutor(16) as callers:
        effects = set(callers.map(lambda _: client.check("read", "m1").effect, range(2000)))
print(sorted(effects))
"""


def test_whole_calls_under_load_do_not_grow_the_pool() -> None:
    """16 whole calls in flight, over and over, from another process as callers are:
    the pool keeps its four threads (a call whose request is there never counts as
    held). With the 16 callers in the sidecar's own process, their threads starved
    its workers of the GIL past `STUCK_SECONDS` now and then on a loaded machine, and
    the pool grew by a thread or two."""
    with RunningSidecar(pinned=True) as running:
        with MemLineageClient(running.address, timeout=10) as client:
            client.record("m1", creator="user:alice")
        out = subprocess.run(
            [sys.executable, "-c", LOAD, running.address],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip() == f"[{pb.EFFECT_ALLOW}]"
        assert _pool(running).threads == EMBEDDED_WORKERS


def test_the_pool_grows_to_its_bound_and_no_further() -> None:
    """A pool of two threads, at most five: seven tasks that never say their request
    came hold five threads; an eighth, whole, waits until one of them ends."""
    pool = CallPool(2, most=5)
    release = threading.Event()
    try:
        held = [pool.submit(release.wait, 20) for _ in range(7)]
        time.sleep(STUCK_SECONDS * 2)
        whole = pool.submit(lambda: (pool.received(), "served")[1])
        time.sleep(STUCK_SECONDS * 2)
        assert pool.threads == 5
        assert not whole.done()
        release.set()
        assert whole.result(timeout=10) == "served"
        assert all(h.result(timeout=10) for h in held)
    finally:
        release.set()
        pool.shutdown(wait=True)


def test_a_pool_that_serves_no_held_call_keeps_its_workers() -> None:
    """Tasks that say their request came at once never count as held, however slow the
    handler: a task that runs 0.5 s after `received` grows nothing."""
    pool = CallPool(2, most=50)
    try:

        def slow() -> str:
            pool.received()
            time.sleep(0.5)
            return "done"

        futures = [pool.submit(slow) for _ in range(6)]
        assert [f.result(timeout=10) for f in futures] == ["done"] * 6
        assert pool.threads == 2
    finally:
        pool.shutdown(wait=True)


def test_a_probe_is_answered_while_health_checks_are_held_open() -> None:
    """Anyone may call health without a token: twenty Checks held open without their
    request (more than health's eight threads) leave a probe its answer (before: they
    held every thread of health's Check, and an orchestrator's probes timed out)."""
    from memlineage.grpc_api.standard import HEALTH_THREADS

    with RunningSidecar(pinned=True) as running:
        channel = grpc.insecure_channel(running.address)
        stop = threading.Event()
        check = "/grpc.health.v1.Health/Check"
        calls = _open_without_request(channel, [check] * (HEALTH_THREADS + 12), stop)
        try:
            time.sleep(STUCK_SECONDS * 3)
            probe = channel.unary_unary(check, request_serializer=None, response_deserializer=None)
            started = time.monotonic()
            assert probe(b"", timeout=5) == b"\x08\x01"  # SERVING
            assert time.monotonic() - started < 3.0
            assert not any(call.done() for call in calls)
        finally:
            stop.set()
            for call in calls:
                call.cancel()
            channel.close()


def test_a_watch_opens_while_watch_calls_are_held_open(monkeypatch: pytest.MonkeyPatch) -> None:
    """Watch calls that never send their request hold threads of Watch's pool before
    any per-caller count applies: with a pool of four (eight at most), six of them leave
    a real Watch its stream (before: it never opened), and the pool's gauge names them."""
    from memlineage.grpc_api.servicer import MemLineageService

    monkeypatch.setattr(MemLineageService, "WATCH_THREADS", 4)
    with (
        RunningSidecar(pinned=True) as running,
        MemLineageClient(running.address, timeout=5) as client,
    ):
        channel = grpc.insecure_channel(running.address)
        stop = threading.Event()
        calls = _open_without_request(channel, [ML + "Watch"] * 6, stop)
        stream = None
        try:
            time.sleep(STUCK_SECONDS * 3)
            stream = client.watch(from_oldest=True)
            seen: list[str] = []
            follower = threading.Thread(target=lambda: seen.append(next(iter(stream)).memory_id))
            follower.start()
            time.sleep(STUCK_SECONDS * 3)  # the held ones taken after the growth wait too
            client.record("m1", creator="user:alice")
            follower.join(10)
            assert seen == ["m1"]
            assert running.sidecar is not None
            scraped = generate_latest(running.sidecar.metrics.registry).decode()
            assert 'memlineage_grpc_calls_held{pool="memlineage-watch"} 6.0' in scraped
        finally:
            stop.set()
            for call in calls:
                call.cancel()
            if stream is not None:
                stream.cancel()
            channel.close()


def test_a_call_queued_behind_calls_not_yet_held_is_served_with_no_call_after_it() -> None:
    """Two tasks take both threads and never say their request came; a whole one
    queued right behind them, before they count as held, and nothing after it: the
    pool looks again on its own and serves it (before: it waited for them to end)."""
    pool = CallPool(2, most=10)
    release = threading.Event()
    try:
        held = [pool.submit(release.wait, 20) for _ in range(2)]
        whole = pool.submit(lambda: (pool.received(), "served")[1])
        assert whole.result(timeout=5) == "served"
        assert not any(h.done() for h in held)
    finally:
        release.set()
        pool.shutdown(wait=True)


def _two_callers() -> tuple[Any, tuple[tuple[str, str], ...]]:
    """A configuration with the tokens of callers `a` and `b`, and `a`'s metadata."""
    from memlineage.config import Config
    from memlineage.grpc_api.auth import TokenGrant
    from support.sidecar import BUNDLED_POLICIES

    config = Config(
        policy_dir=BUNDLED_POLICIES,
        decision_log="off",
        tokens=(TokenGrant("token-a", ("a",), name="a"), TokenGrant("token-b", ("b",), name="b")),
    )
    return config, (("authorization", "Bearer token-a"),)


def test_a_caller_holding_its_share_is_refused_and_others_are_served() -> None:
    """With tokens: a caller holding HELD_PER_CALLER calls without their request gets
    RESOURCE_EXHAUSTED at once for its next ones, whole or not (before: it could take
    every thread the pool grows); another caller is served throughout, and the first
    is served again once its held calls end."""
    from memlineage.grpc_api.gate import HELD_PER_CALLER

    config, as_a = _two_callers()
    with (
        RunningSidecar(config, pinned=True) as running,
        MemLineageClient(running.address, token="token-a", timeout=5) as a,
        MemLineageClient(running.address, token="token-b", timeout=5) as b,
    ):
        pool = _pool(running)
        channel = grpc.insecure_channel(running.address)
        stop = threading.Event()
        idle = channel.stream_unary(
            ML + "Check", request_serializer=None, response_deserializer=None
        )
        calls = [
            idle.future(_never(stop), timeout=25, metadata=as_a) for _ in range(HELD_PER_CALLER)
        ]
        try:
            deadline = time.monotonic() + 10
            while pool.held_by("a") < HELD_PER_CALLER:  # every one on a thread, held
                assert time.monotonic() < deadline, pool.held_by("a")
                time.sleep(0.05)
            one_more = idle.future(_never(stop), timeout=25, metadata=as_a)
            err = one_more.exception(timeout=5)
            assert err is not None and err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert f"holds {HELD_PER_CALLER} calls that have not sent their request" in (
                err.details() or ""
            )
            with pytest.raises(ResourceExhausted, match="holds 32 calls"):
                a.check("read", "m1")
            b.record("m1", creator="user:bob")
            assert b.check("read", "m1").effect == pb.EFFECT_ALLOW
        finally:
            stop.set()
            for call in calls:
                call.cancel()
            channel.close()
        deadline = time.monotonic() + 10
        while pool.held_by("a") and time.monotonic() < deadline:
            time.sleep(0.05)
        a.record("m1", creator="user:alice")
        assert a.check("read", "m1").effect == pb.EFFECT_ALLOW


@pytest.mark.parametrize("method", ["Check", "Watch"])
def test_a_burst_of_held_calls_is_bounded_from_its_first_call(method: str) -> None:
    """400 calls opened at once, none sending its request: before, none had waited
    0.25 s when the next came, so all were admitted and took every thread the pool
    grows (256), and another tenant's Check, or Watch, waited out its deadline (an
    outside audit). A caller's calls are counted from the first: past
    HELD_PER_CALLER the rest are RESOURCE_EXHAUSTED at once, and the other caller
    is served (its Watch sees its own Record) while they are held."""
    from memlineage.grpc_api.gate import HELD_PER_CALLER

    config, as_a = _two_callers()
    with (
        RunningSidecar(config, pinned=True) as running,  # the sync server's pools
        MemLineageClient(running.address, token="token-b", timeout=5) as b,
    ):
        channel = grpc.insecure_channel(running.address)
        stop = threading.Event()
        refused: list[int] = []
        calls: list[Any] = []
        for _ in range(400):
            if method == "Check":
                call: Any = channel.stream_unary(
                    ML + "Check", request_serializer=None, response_deserializer=None
                ).future(_never(stop), timeout=25, metadata=as_a)
            else:
                call = channel.stream_stream(
                    ML + "Watch", request_serializer=None, response_deserializer=None
                )(_never(stop), timeout=25, metadata=as_a)
            call.add_done_callback(
                lambda c: (
                    refused.append(1) if c.code() == grpc.StatusCode.RESOURCE_EXHAUSTED else None
                )
            )
            calls.append(call)
        try:
            deadline = time.monotonic() + 15
            while len(refused) < 400 - HELD_PER_CALLER:
                assert time.monotonic() < deadline, len(refused)
                time.sleep(0.05)
            b.record("m1", creator="user:bob")
            if method == "Check":
                assert b.check("read", "m1").effect == pb.EFFECT_ALLOW
            else:
                stream = b.watch(from_oldest=True)
                first = next(iter(stream))
                assert first.memory_id == "m1"
                stream.cancel()
        finally:
            stop.set()
            for call in calls:
                call.cancel()
            channel.close()


class _Calls:
    """Calls on `pool` that say their request came at once and return their name; the
    one named `holding` runs until `release` (`started` says it is running)."""

    def __init__(self, pool: CallPool, holding: str) -> None:
        self.pool, self.holding = pool, holding
        self.started, self.release = threading.Event(), threading.Event()
        self.ran: list[str] = []

    def call(self, name: str) -> str:
        self.pool.received()
        self.ran.append(name)
        if name == self.holding:
            self.started.set()
            self.release.wait(20)
        return name

    def submit(self, caller: str | None, name: str) -> Any:
        """`name`'s call, submitted as `caller`'s (as the server's interceptor says)."""
        self.pool.for_caller(caller)
        return self.pool.submit(self.call, name)


def test_callers_take_turns_for_the_pools_threads() -> None:
    """One thread; tenant A's call runs and three more of A's wait, then two of B's and
    one of no one's: they take turns, A, B, no one, A, ... (before: one line, B behind
    all of A's: one tenant's burst of heavy calls kept another's Check past its
    deadline). Calls of no caller (no tokens) keep one line, in order. Each future is
    its own call's."""
    pool = CallPool(1, most=1)
    calls = _Calls(pool, holding="a0")
    started, release, ran, submit = calls.started, calls.release, calls.ran, calls.submit
    try:
        first = submit("a", "a0")
        assert started.wait(10)
        queued = [submit("a", f"a{i}") for i in (1, 2, 3)]
        queued += [submit("b", "b0"), submit("b", "b1"), submit(None, "n0")]
        release.set()
        assert [f.result(timeout=10) for f in [first, *queued]] == [
            "a0",
            "a1",
            "a2",
            "a3",
            "b0",
            "b1",
            "n0",
        ]
        assert ran == ["a0", "a1", "b0", "n0", "a2", "b1", "a3"]
        release.clear()
        started.clear()
        first = submit(None, "a0")
        assert started.wait(10)
        rest = [submit(None, n) for n in ("x", "y", "z")]
        release.set()
        assert [f.result(timeout=10) for f in rest] == ["x", "y", "z"]
        assert ran[-3:] == ["x", "y", "z"]  # no caller: one line, in order
    finally:
        release.set()
        pool.shutdown(wait=True)


def test_a_caller_whose_first_call_finds_every_thread_busy_gets_one_of_its_own() -> None:
    """One thread, held by tenant A's call, and more of A's queued: B's call gets a
    thread of its own (the pool grows by one) and is answered while A's still runs
    (before: B waited for A's call to end, then for A's queued ones). A's own queued
    calls grow nothing, nor do calls of no caller (no tokens)."""
    pool = CallPool(1, most=4)
    calls = _Calls(pool, holding="a0*")
    started, release, submit = calls.started, calls.release, calls.submit
    try:
        held = submit("a", "a0*")
        assert started.wait(10)
        a_queued = [submit("a", "a1"), submit("a", "a2"), submit(None, "n0")]
        assert pool.threads == 1  # A has a call running; no caller's calls grow nothing
        b = submit("b", "b0")
        assert b.result(timeout=10) == "b0" and not held.done()
        assert pool.threads == 2
        release.set()
        assert [f.result(timeout=10) for f in (held, *a_queued)] == ["a0*", "a1", "a2", "n0"]
        assert pool.threads == 2
    finally:
        release.set()
        pool.shutdown(wait=True)


def test_shutdown_cancels_the_queued_calls_and_lets_the_running_one_end() -> None:
    """One thread holding a call and two queued: `shutdown(cancel_futures=True)` says
    the queued ones are cancelled on their own futures (what grpc waits on to count a
    call ended; before, they stayed pending), the running one ends with its answer,
    and nothing is taken after."""
    pool = CallPool(1, most=1)
    calls = _Calls(pool, holding="a0")
    try:
        running = calls.submit(None, "a0")
        assert calls.started.wait(10)
        queued = [calls.submit(None, "a1"), calls.submit("b", "b0")]
        pool.shutdown(wait=False, cancel_futures=True)
        assert all(f.cancelled() for f in queued)
        assert pool.unread_by("b") == 0
        calls.release.set()
        assert running.result(timeout=10) == "a0"
        with pytest.raises(RuntimeError, match="after shutdown"):
            pool.submit(calls.call, "late")
        pool.shutdown(wait=True)
        assert calls.ran == ["a0"]
    finally:
        calls.release.set()

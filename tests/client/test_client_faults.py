"""Both clients against a real `memlineage serve` process under faults a caller meets:
a sidecar back after a long outage (its calls reach it within their deadline, not
minutes later), a client closed with calls and a Watch in flight (they fail with
the sync client's error; the tasks reading them are not reported cancelled), and a
call on a closed client (the same RuntimeError from both clients)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import grpc
import pytest
from memlineage.client import (
    AsyncMemLineageClient,
    Cancelled,
    DeadlineExceeded,
    MemLineageClient,
    MemLineageError,
)
from support.serve_process import ServeProcess


def _address(args: list[str]) -> str:
    return args[args.index("--listen") + 1]


# ---------------------------------------------------------------- a long outage


def test_a_sidecar_back_after_a_long_outage_is_reached_within_the_calls_deadline(
    served: tuple,
) -> None:
    """No sidecar for 16 s while the client keeps calling (each call waits its 2.5 s
    and fails), then one starts on that port: the next call is answered. Before, the
    channel's reconnect backoff (gRPC's default: 1 s growing 1.6x up to 120 s) had
    grown to ~10 s, so calls made while the sidecar was up again failed with
    "the sidecar ... was never reachable" until the next attempt, up to 2 minutes
    after a long outage."""
    args, procs = served
    with MemLineageClient(_address(args), timeout=2.5) as client:
        began = time.monotonic()
        while time.monotonic() - began < 16:
            with pytest.raises(DeadlineExceeded, match="never reachable"):
                client.health()
        procs.append(ServeProcess(args))
        answered = time.monotonic()
        assert client.health() == "SERVING"
        assert time.monotonic() - answered < 2.5


# ---------------------------------------------------------------- closing in flight


def _paused(args: list[str], procs: list[ServeProcess]) -> ServeProcess:
    """A sidecar that accepted a connection, then stopped (SIGSTOP): calls stay in flight."""
    procs.append(server := ServeProcess(args))
    return server


def test_closing_the_async_client_fails_its_calls_in_flight_as_the_sync_one_does(
    served: tuple,
) -> None:
    """A call in flight when its client is closed: the sync client raises
    MemLineageError CANCELLED; the async one raised asyncio.CancelledError into a task
    nobody cancelled, which then reported itself cancelled (a TaskGroup or gather
    takes that for a cancellation, not a failed call). A Watch read the same."""
    args, procs = served
    server = _paused(args, procs)

    sync = MemLineageClient(server.address, timeout=10)
    assert sync.health() == "SERVING"
    os.kill(server.proc.pid, signal.SIGSTOP)
    failed: list[BaseException] = []

    def call() -> None:
        try:
            sync.check("read", "x")
        except BaseException as exc:  # what it raised is the subject
            failed.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.3)
    sync.close()
    caller.join(5)
    [sync_error] = failed
    assert type(sync_error) is Cancelled
    assert sync_error.code == grpc.StatusCode.CANCELLED

    async def scenario() -> None:
        client = AsyncMemLineageClient(server.address, timeout=10)
        watch = client.watch()

        async def follow() -> None:
            async for _ in watch:
                pass

        check = asyncio.create_task(client.check("read", "x"))
        record = asyncio.create_task(client.record("y", creator="user:u"))
        reading = asyncio.create_task(follow())
        await asyncio.sleep(0.3)
        assert not check.done() and not record.done() and not reading.done()
        await client.close()
        for task in (check, record, reading):
            with pytest.raises(MemLineageError) as caught:
                await asyncio.wait_for(task, 5)
            assert type(caught.value) is type(sync_error)
            assert caught.value.code == grpc.StatusCode.CANCELLED
            assert not task.cancelled()

    asyncio.run(scenario())


def test_a_cancelled_async_call_is_still_a_cancellation(served: tuple) -> None:
    """The other side of the above: a call whose own task is cancelled (``task.cancel``,
    ``asyncio.wait_for``) ends cancelled, leaves no task behind, and the client serves
    the next call once the sidecar answers again."""
    args, procs = served
    server = _paused(args, procs)

    async def scenario() -> None:
        async with AsyncMemLineageClient(server.address, timeout=10) as client:
            assert await client.health() == "SERVING"
            os.kill(server.proc.pid, signal.SIGSTOP)
            try:
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(client.check("read", "x"), 0.3)
                task = asyncio.create_task(client.record("y", creator="user:u"))
                await asyncio.sleep(0.3)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert task.cancelled()
                assert asyncio.all_tasks() == {asyncio.current_task()}
            finally:
                os.kill(server.proc.pid, signal.SIGCONT)
            assert await client.health() == "SERVING"

    asyncio.run(scenario())


def test_a_closed_client_refuses_calls_with_the_same_error_in_both_clients(
    served: tuple,
) -> None:
    """A call on a closed client: RuntimeError from both. The sync one raised grpc's
    ValueError ("Cannot invoke RPC on closed channel!"), which ``except ValueError``,
    the way callers catch an `InvalidArgument`, took for a refused argument."""
    args, procs = served
    procs.append(server := ServeProcess(args))
    sync = MemLineageClient(server.address, timeout=10)
    assert sync.health() == "SERVING"
    sync.close()
    for call in (lambda: sync.check("read", "x"), lambda: next(sync.watch())):
        with pytest.raises(RuntimeError, match="closed"):
            call()

    async def scenario() -> None:
        client = AsyncMemLineageClient(server.address, timeout=10)
        assert await client.health() == "SERVING"
        await client.close()
        with pytest.raises(RuntimeError, match="closed"):
            await client.check("read", "x")

    asyncio.run(scenario())

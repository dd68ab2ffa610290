"""AsyncMemLineageClient against real sidecars: every method (answering as the sync
client does on the same sidecar), the same error classes and details, Watch as an
async iterator, deadlines on a paused and on a stopped sidecar, calls that wait
across a sidecar restart on the same port (an act sent once: its grant spent once),
and which calls gRPC re-sends when a sidecar whose store is down answers UNAVAILABLE
(counted by the sidecar itself). Plus the parity of the two clients' signatures."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import os
import re
import signal
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from memlineage.client import (
    ActArg,
    AsyncMemLineageClient,
    AsyncWatchStream,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    MemLineageClient,
    MemLineageError,
    NotFound,
    OutOfRange,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)
from memlineage.config import Config
from memlineage.grpc_api.auth import TokenGrant
from memlineage.lineage.clock import ManualClock
from memlineage.v1 import memlineage_pb2 as pb
from support.memories import T0
from support.redis_servers import start_redis_server
from support.serve_process import ServeProcess
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

TOKENS = (
    TokenGrant("token-alice", ("user-a",), name="alice"),
    TokenGrant("token-bob", ("user-b",), name="bob"),
    TokenGrant("token-admin", (), admin=True, name="ops"),
)
WAIT = 10.0
FAST_RECONNECT = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
]


@pytest.fixture(scope="module")
def sidecar() -> Iterator[RunningSidecar]:
    config = Config(policy_dir=BUNDLED_POLICIES, tokens=TOKENS, decision_log="off")
    with RunningSidecar(config, ManualClock(T0)) as s:
        yield s


@pytest.fixture
def sync(sidecar: RunningSidecar) -> Iterator[MemLineageClient]:
    with MemLineageClient(sidecar.address, token="token-alice", timeout=WAIT) as c:
        yield c


def unique(name: str) -> str:
    """An id of this test's own (the module's sidecar is shared)."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def run(
    address: str, scenario: Callable[[AsyncMemLineageClient], Awaitable[Any]], **kwargs: Any
) -> Any:
    """``scenario(client)`` in a fresh event loop with a fresh async client."""
    kwargs.setdefault("timeout", WAIT)

    async def main() -> Any:
        async with AsyncMemLineageClient(address, **kwargs) as client:
            return await scenario(client)

    return asyncio.run(main())


# ---------------------------------------------------------------- parity


def _public(cls: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def test_the_async_client_has_every_public_method_of_the_sync_one_with_its_signature() -> None:
    sync_methods, async_methods = _public(MemLineageClient), _public(AsyncMemLineageClient)
    assert set(async_methods) == set(sync_methods)
    assert {"record", "check", "act", "grant", "filter_rank", "feedback", "watch"} <= set(
        sync_methods
    )
    for name, method in sync_methods.items():
        mine, theirs = inspect.signature(async_methods[name]), inspect.signature(method)
        assert list(mine.parameters.values()) == list(theirs.parameters.values()), name
        if name == "watch":
            assert not inspect.iscoroutinefunction(async_methods[name])
            assert mine.return_annotation == "AsyncWatchStream"
        else:
            assert inspect.iscoroutinefunction(async_methods[name]), name
            assert mine.return_annotation == theirs.return_annotation, name
    # the constructors take the same arguments; only ``sleep`` is a coroutine function
    mine = inspect.signature(AsyncMemLineageClient.__init__).parameters
    theirs = inspect.signature(MemLineageClient.__init__).parameters
    assert list(mine) == list(theirs)
    for name in mine:
        if name != "sleep":
            assert mine[name] == theirs[name], name
    assert set(_public(AsyncWatchStream)) >= {"cancel", "close"}


# ---------------------------------------------------------------- every method


def test_every_method_answers_as_the_sync_client_does(
    sidecar: RunningSidecar, sync: MemLineageClient
) -> None:
    city, hotel, guess, city2 = (unique(n) for n in ("city", "hotel", "guess", "city2"))
    prompt, bill, note, summary = (unique(n) for n in ("prompt", "bill", "note", "summary"))
    claim = ("user:alice", unique("destination"), "Shanghai")

    async def scenario(c: AsyncMemLineageClient) -> None:
        assert (await c.record(city, creator="user:alice", claim=claim)).recorded
        await c.record(hotel, creator="agent:planner", dependencies=[city])
        await c.record(guess, creator="reasoning:planner", confidence=0.4)
        assert (await c.explain(hotel)) == sync.explain(hotel)

        for op, mid in (("read", hotel), ("read", guess), ("update", city), ("derive", city)):
            mine, theirs = (
                await c.check(op, mid, actor="agent:planner"),
                sync.check(op, mid, actor="agent:planner"),
            )
            assert (mine.effect, list(mine.reasons)) == (theirs.effect, list(theirs.reasons))
        candidates = [(hotel, 0.9), (guess, 0.95)]
        ranked = await c.filter_rank(candidates, limit=5)
        assert list(ranked.ranked_ids) == list(sync.filter_rank(candidates, limit=5).ranked_ids)
        assert list(ranked.ranked_ids) == [hotel]

        fix = await c.record(city2, creator="user:alice", claim=(claim[0], claim[1], "Beijing"))
        assert fix.superseded_id == city and list(fix.affected_ids) == [hotel]
        assert (await c.confirm(hotel, reason="checked")).applied
        assert sync.explain(hotel).memory.status == pb.STATUS_ACTIVE
        await c.record(note, creator="user:alice")
        await c.record(summary, creator="user:alice", dependencies=[note])
        assert (await c.compress(note, summary)).applied
        assert sync.explain(note).memory.status == pb.STATUS_COMPRESSED
        assert (await c.revoke(guess, reason="wrong", expected_version=1)).applied
        assert sync.explain(guess).memory.status == pb.STATUS_REVOKED
        old, new = unique("old"), unique("new")
        await c.record(old, creator="user:alice")
        await c.record(new, creator="user:alice")
        assert (await c.supersede(old, new, reason="newer")).applied
        assert sync.explain(old).memory.status == pb.STATUS_SUPERSEDED

        # the act gate: a user's grant lets a file's amount through once
        await c.record(prompt, creator="user:alice")
        await c.record(bill, creator="tool:read_file", type="tool_result")
        g = await c.grant(["send_money"], memory_id=bill, arguments=["amount"], uses=1)
        assert g.effective and g.uses == 1
        pay = {"recipient": [prompt], "amount": ActArg([bill], value="100")}
        first = await c.act("send_money", pay)
        assert first.effect == pb.EFFECT_ALLOW and list(first.grants_used) == [g.id]
        assert sync.act("send_money", pay).effect == pb.EFFECT_DENY  # spent
        assert [x.used for x in (await c.explain(bill)).grants if x.id == g.id] == [1]

        d = await c.check("read", prompt)
        assert (await c.feedback(d.decision_id, [prompt], True, note="ok")).updated == 1
        assert await c.health() == "SERVING" == sync.health()
        assert await c.health("memlineage.v1.PolicyAdmin") == "SERVING"

    run(sidecar.address, scenario, token="token-alice")

    async def admin(c: AsyncMemLineageClient) -> None:
        with MemLineageClient(sidecar.address, token="token-admin", timeout=WAIT) as ops:
            listed = await c.list_policies()
            assert listed == ops.list_policies()
            assert {p.name for p in listed.policies} >= {"user_statements_protected"}
            bad = {"p.mlp": "policy p { on read whne true deny }"}
            linted = await c.lint_policy(bad)
            assert not linted.ok and linted == ops.lint_policy(bad)
            reloaded = await c.reload_policies()
            assert reloaded.applied and reloaded.version == ops.list_policies().version
            swept = await c.run_sweep("user-a", batch=10)
            assert swept.examined == ops.run_sweep("user-a", batch=10).examined

    run(sidecar.address, admin, token="token-admin")


# ---------------------------------------------------------------- errors


ERROR_CASES: list[tuple[str, str | None, str, Callable[[Any], Any], type[MemLineageError]]] = [
    ("bad id", "token-alice", "", lambda c: c.record("no spaces!", creator="user:alice"),
     InvalidArgument),
    ("bad confidence", "token-alice", "",
     lambda c: c.record("conf", creator="user:alice", confidence=1.5), InvalidArgument),
    ("bad depth", "token-alice", "", lambda c: c.explain("x", ancestor_depth=-1),
     InvalidArgument),
    ("unknown memory", "token-alice", "", lambda c: c.explain("nowhere"), NotFound),
    ("unknown memory revoked", "token-alice", "", lambda c: c.revoke("nowhere"), NotFound),
    ("other tenant", "token-bob", "user-a", lambda c: c.check("read", "x"), PermissionDenied),
    ("other tenant act", "token-bob", "user-a", lambda c: c.act("send_money"),
     PermissionDenied),
    ("not admin", "token-alice", "", lambda c: c.reload_policies(), PermissionDenied),
    ("no token", None, "", lambda c: c.record("x", creator="user:alice"), Unauthenticated),
    ("wrong token", "token-mallory", "", lambda c: c.list_policies(), Unauthenticated),
    ("stale version", "token-alice", "", lambda c: c.revoke("err-fact", expected_version=7),
     FailedPrecondition),
]  # fmt: skip


@pytest.mark.parametrize(
    ("token", "namespace", "call", "error"),
    [case[1:] for case in ERROR_CASES],
    ids=[case[0] for case in ERROR_CASES],
)
def test_errors_are_the_sync_clients_classes_with_the_same_details(
    sidecar: RunningSidecar,
    sync: MemLineageClient,
    token: str | None,
    namespace: str,
    call: Callable[[Any], Any],
    error: type[MemLineageError],
) -> None:
    if not _exists(sync):
        sync.record("err-fact", creator="user:alice")
    with (
        MemLineageClient(sidecar.address, token=token, namespace=namespace, timeout=WAIT) as c,
        pytest.raises(MemLineageError) as theirs,
    ):
        call(c)

    async def scenario(c: AsyncMemLineageClient) -> MemLineageError:
        with pytest.raises(MemLineageError) as mine:
            await call(c)
        return mine.value

    mine = run(sidecar.address, scenario, token=token, namespace=namespace)
    assert type(mine) is type(theirs.value) is error
    assert (mine.code, mine.details) == (theirs.value.code, theirs.value.details)
    if error is InvalidArgument:
        field, colon, message = mine.details.partition(":")
        assert colon and field and message.strip(), mine.details  # "field: message"
    if error is PermissionDenied and namespace:
        assert mine.details.startswith("namespace:") and "user-a" in mine.details


def _exists(sync: MemLineageClient) -> bool:
    try:
        sync.explain("err-fact")
    except NotFound:
        return False
    return True


def test_a_bad_argument_fails_before_any_call(sidecar: RunningSidecar) -> None:
    async def scenario(c: AsyncMemLineageClient) -> None:
        with pytest.raises(ValueError, match="actor"):
            await c.check("read", "m", actor="robot:r2")
        with pytest.raises(ValueError, match="one id"):
            await c.check("read", ["a", "b"])
        with pytest.raises(TypeError, match="ActArg"):
            await c.act("send_money", {"to": "m"})  # type: ignore[dict-item]

    run(sidecar.address, scenario, token="token-alice")
    with pytest.raises(ValueError, match="timeout"):
        AsyncMemLineageClient("127.0.0.1:1", timeout=0)
    with pytest.raises(ValueError, match="retries"):
        AsyncMemLineageClient("127.0.0.1:1", retries=-1)


# ---------------------------------------------------------------- watch


def test_watch_streams_events_and_cancel_ends_it(sidecar: RunningSidecar) -> None:
    ids = [unique("w") for _ in range(3)]

    async def scenario(c: AsyncMemLineageClient) -> None:
        stream = c.watch()  # from now on
        seen: list[str] = []

        async def read() -> None:
            async for event in stream:
                if event.memory_id in ids:
                    seen.append(event.memory_id)

        reader = asyncio.create_task(read())
        await asyncio.sleep(0.2)  # the watch is open and blocked: other calls still answer
        for mid in ids:
            await c.record(mid, creator="user:alice")
        while len(seen) < len(ids):
            await asyncio.sleep(0.02)
        cursor = stream.cursor
        stream.cancel()  # ends the pending read: the loop finishes, no error
        await asyncio.wait_for(reader, WAIT)
        assert seen == ids and cursor

        # resuming after a cursor; a garbage cursor is the sync client's error
        async with c.watch(from_oldest=True) as again:
            first = await anext(again)
        async with c.watch(cursor=first.cursor) as after:
            assert (await anext(after)).cursor != first.cursor
        with pytest.raises(InvalidArgument, match="cursor"):
            await anext(c.watch(cursor="not-a-cursor"))
        with pytest.raises(OutOfRange, match="cursor"):
            await anext(c.watch(cursor=str(int(first.cursor) + 10**6)))

    run(sidecar.address, scenario, token="token-alice")


def test_a_cancelled_reader_task_is_cancelled_not_ended(sidecar: RunningSidecar) -> None:
    """Cancelling the task reading a watch raises CancelledError in it (the stream
    does not swallow a cancellation that is not its own)."""

    async def scenario(c: AsyncMemLineageClient) -> None:
        stream = c.watch()
        reader = asyncio.create_task(anext(stream))
        await asyncio.sleep(0.2)
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
        stream.cancel()

    run(sidecar.address, scenario, token="token-alice")


# ---------------------------------------------------------------- loops and closing


def test_built_outside_a_loop_used_in_one_and_refused_in_another(sidecar: RunningSidecar) -> None:
    client = AsyncMemLineageClient(sidecar.address, token="token-alice", timeout=WAIT)
    assert asyncio.run(client.health()) == "SERVING"  # channels opened in this loop
    with pytest.raises(RuntimeError, match="another event loop"):
        asyncio.run(client.health())

    async def closed() -> None:
        fresh = AsyncMemLineageClient(sidecar.address, timeout=WAIT)
        await fresh.close()
        with pytest.raises(RuntimeError, match="closed"):
            await fresh.health()

    asyncio.run(closed())


# ---------------------------------------------------------------- deadlines, restarts


def test_a_paused_sidecar_is_a_deadline_within_the_timeout(served: tuple) -> None:
    args, procs = served
    procs.append(s := ServeProcess(args))

    async def scenario(c: AsyncMemLineageClient) -> None:
        assert await c.health() == "SERVING"
        os.kill(s.proc.pid, signal.SIGSTOP)
        try:
            for call in (c.check("read", "x"), c.record("x", creator="user:u"), c.act("a")):
                began = time.monotonic()
                with pytest.raises(DeadlineExceeded) as caught:
                    await call
                assert 0.9 < time.monotonic() - began < 3.0
                assert "never reachable" not in caught.value.details  # connected: paused
        finally:
            os.kill(s.proc.pid, signal.SIGCONT)
        assert await c.health() == "SERVING"

    run(s.address, scenario, timeout=1.0)


def test_a_stopped_sidecar_is_a_deadline_or_at_once_unavailable(served: tuple) -> None:
    args, procs = served
    procs.append(s := ServeProcess(args))
    address = s.address

    async def waiting(c: AsyncMemLineageClient) -> None:
        assert await c.health() == "SERVING"
        s.kill()
        began = time.monotonic()
        with pytest.raises(DeadlineExceeded) as caught:  # it waits for it, up to the timeout
            await c.explain("x")
        assert 0.9 < time.monotonic() - began < 3.0
        # named: a sidecar not there, not a slow answer (before: a bare "Deadline Exceeded")
        assert f"the sidecar at {address} was never reachable" in caught.value.details

    async def failing_fast(c: AsyncMemLineageClient) -> None:
        began = time.monotonic()
        with pytest.raises(Unavailable):  # retries=0: no waiting
            await c.check("read", "x")
        assert time.monotonic() - began < 1.0

    run(address, waiting, timeout=1.0)
    run(address, failing_fast, timeout=1.0, retries=0)


def test_calls_made_while_the_sidecar_restarts_are_answered_once_it_is_back(
    served: tuple,
) -> None:
    """The sidecar is killed and started again on the same port and data directory:
    a check and an act made in between wait for it (not sent: nothing to re-send) and
    are answered by the new process; the act was sent once, its grant used once."""
    args, procs = served
    procs.append(first := ServeProcess(args))
    prompt, bill = unique("prompt"), unique("bill")

    async def scenario(c: AsyncMemLineageClient) -> None:
        await c.record(prompt, creator="user:alice")
        await c.record(bill, creator="tool:read_file", type="tool_result")
        g = await c.grant(
            ["send_money"], memory_id=bill, arguments=["amount"], uses=2, actor="user:alice"
        )
        before = await c.check("read", prompt)
        first.kill()
        pay = {"recipient": [prompt], "amount": [bill]}
        check = asyncio.create_task(c.check("read", prompt))
        act = asyncio.create_task(c.act("send_money", pay))
        await asyncio.sleep(0.5)
        assert not check.done() and not act.done()  # waiting for the channel
        procs.append(await asyncio.to_thread(ServeProcess, args))
        assert (await check).effect == before.effect
        allowed = await act
        assert allowed.effect == pb.EFFECT_ALLOW and list(allowed.grants_used) == [g.id]
        [shown] = [x for x in (await c.explain(bill)).grants if x.id == g.id]
        assert shown.used == 1 and shown.effective  # one use of two: sent exactly once

    run(first.address, scenario, timeout=60, options=FAST_RECONNECT)


# ---------------------------------------------------------------- a store outage


def _unavailable(s: RunningSidecar, rpc: str) -> int:
    """Attempts of ``rpc`` the sidecar answered UNAVAILABLE (its own error counter)."""
    assert s.sidecar is not None
    value = s.sidecar.metrics.registry.get_sample_value(
        "memlineage_rpc_errors_total", {"method": rpc, "code": "UNAVAILABLE"}
    )
    return int(value or 0)


OUTAGE_CALLS: list[tuple[str, str, Callable[[Any], Any], bool]] = [
    ("check", "Check", lambda c: c.check("read", "pref"), True),
    ("filter_rank", "FilterRank", lambda c: c.filter_rank([("pref", 0.9)]), True),
    ("explain", "Explain", lambda c: c.explain("pref"), True),
    ("act", "Check", lambda c: c.act("send_money", {"amount": ["pref"]}), False),
    ("record", "Record", lambda c: c.record("lost", creator="user:alice"), False),
    ("revoke", "UpdateStatus", lambda c: c.revoke("pref"), False),
]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_sidecar_whose_store_is_down_gets_read_only_calls_again_and_the_rest_once(
    tmp_path: Path, kind: str
) -> None:
    """Redis is stopped under a real sidecar, which answers UNAVAILABLE: with retries=2
    gRPC sends a check, a FilterRank and an Explain 3 times; an act, a Record and a
    status change it sent once (they reached the sidecar: they must not run twice)."""
    redis = start_redis_server(tmp_path / "redis")
    try:
        config = Config(policy_dir=BUNDLED_POLICIES, store=redis.url, decision_log="off")
        with RunningSidecar(config) as s:
            with MemLineageClient(s.address, timeout=WAIT) as setup:
                setup.record("pref", creator="user:alice")
            redis.stop()
            for name, rpc, call, retried in OUTAGE_CALLS:
                before = _unavailable(s, rpc)
                with pytest.raises(Unavailable):
                    if kind == "sync":
                        with MemLineageClient(s.address, timeout=WAIT, retries=2) as c:
                            call(c)
                    else:
                        run(s.address, call, retries=2)
                assert _unavailable(s, rpc) - before == (3 if retried else 1), name
    finally:
        redis.stop()


# ---------------------------------------------------------------- the README


def test_readme_async_example_runs_as_documented() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Using it from an agent") : readme.index("### With LangGraph")]
    [code] = [
        block
        for block in re.findall(r"```python\n(.*?)```", section, re.S)
        if "AsyncMemLineageClient" in block
    ]
    printed = re.search(r"```\n\nprints `([^`]+)`", section[section.index(code) :])
    assert printed is not None
    with RunningSidecar() as fresh:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code.replace("127.0.0.1:50051", fresh.address), "README", "exec"), {})
    assert out.getvalue() == printed.group(1) + "\n"

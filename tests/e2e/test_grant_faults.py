"""Redis faults on the two newer store features, grants (the act gate's delegations,
spent by one Lua script, `RedisGrants._use_grants`) and proposals (the agent-voice
objection window, saved with their Watch event by one script), on a real
redis-server of the test's own (AOF, appendfsync always). Bounded in time.

What the code promises, and what is checked in Redis itself afterwards:

* A grant's recorded uses (``ml:{ns}:gu``) never exceed its limit: the script checks
  every named grant's ``used < uses`` and only then increments, in one step.
* Every act acknowledged as allowed with a grant in ``grants_used`` spent exactly one
  use, and that spend survives a SIGKILL (the script's reply comes after the AOF
  fsync): ``acknowledged <= used``.
* A spend the client was not told about is possible, and bounded: an act that
  answered UNAVAILABLE may have spent its use (the reply was lost, the store died
  between the spend and the act's later writes, or, under SIGSTOP, the script sat in
  the socket and ran after SIGCONT, when the sidecar had already given up). So
  ``used <= acknowledged + unavailable``, never more: an act is never re-sent.
* A proposal is saved wholly (its JSON and its `objected` Watch event) or not at all.
* Under SIGSTOP every call fails within its bound with UNAVAILABLE, never a hang, a
  DEADLINE_EXCEEDED, UNKNOWN or INTERNAL, and the store serves again after SIGCONT.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest
import redis
from memlineage.client import MemLineageClient, MemLineageError, Unavailable
from memlineage.config import Config
from memlineage.grpc_api.auth import TokenGrant
from memlineage.lineage.clock import system_clock
from memlineage.lineage.errors import StoreUnavailableError
from memlineage.lineage.grants import GrantRecord
from memlineage.lineage.model import MemoryRecord
from memlineage.lineage.proposals import POSTPONED, Objection, Proposal
from memlineage.store import open_store
from memlineage.store.base import LineageStore
from memlineage.v1 import memlineage_pb2 as pb
from support.proposals import OWNER, pending_for_an_hour
from support.redis_servers import RedisServer
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

NS = "grantfaults"
TAG = f"ml:{{{NS}}}"
TOKENS = (TokenGrant("tok", (NS,), name="t"),)
DEADLINE = 5.0  # the client's deadline
BOUND = 2.5  # socket timeout (1 s) plus one reconnect and the RPC itself
PROMPT, BILL = "prompt", "bill"
PAY = {"recipient": [PROMPT], "amount": [BILL]}  # the amount needs the grant on `bill`


def sidecar(server: RedisServer) -> RunningSidecar:
    # The real clock: the redis timeouts and the client deadlines run in real time.
    return RunningSidecar(
        Config(policy_dir=BUNDLED_POLICIES, store=server.url, tokens=TOKENS, decision_log="off"),
        system_clock,
    )


def client(address: str) -> MemLineageClient:
    return MemLineageClient(address, token="tok", namespace=NS, timeout=DEADLINE, retries=0)


def setup_grant(c: MemLineageClient, uses: int) -> str:
    """The user's prompt, a bill read by a tool, and the user's grant letting the bill
    fill the amount of send_money `uses` times: each allowed payment spends one."""
    assert c.record(PROMPT, creator="user:alice").recorded
    assert c.record(BILL, creator="tool:read_file", type="tool_result").recorded
    g = c.grant(["send_money"], memory_id=BILL, arguments=["amount"], uses=uses)
    assert g.effective and g.uses == uses and g.used == 0
    return str(g.id)


@dataclass
class Tally:
    """What the acts were told, by the clients that sent them."""

    gid: str
    allowed: int = 0
    denied: int = 0
    unavailable: int = 0
    other: list[str] = field(default_factory=list)
    slow: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def act(self, c: MemLineageClient) -> None:
        started = time.monotonic()
        try:
            d = c.act("send_money", PAY)
        except Unavailable:
            outcome = "unavailable"
        except MemLineageError as err:  # anything else is a bug: noted, asserted later
            outcome = f"{err.code.name}: {err.details}"
        else:
            if d.effect == pb.EFFECT_DENY:
                assert not d.grants_used
                outcome = "denied"
            else:  # allowed: exactly one use of exactly this grant
                assert list(d.grants_used) == [self.gid], d
                outcome = "allowed"
        took = time.monotonic() - started
        with self.lock:
            if outcome in ("allowed", "denied", "unavailable"):
                setattr(self, outcome, getattr(self, outcome) + 1)
            else:
                self.other.append(outcome)
            if took >= BOUND:
                self.slow.append(took)


def payer(address: str, tally: Tally, stop: threading.Event, most: int = 400) -> None:
    with client(address) as c:
        for _ in range(most):
            if stop.is_set():
                return
            tally.act(c)


def uses_in_redis(r: redis.Redis, gid: str) -> tuple[int, int]:
    """(uses, used) of grant `gid` as Redis holds them; the hashes hold only it."""
    assert r.hkeys(f"{TAG}:g") == [gid]
    assert set(r.hkeys(f"{TAG}:gu")) <= {gid}
    g = GrantRecord.from_json(r.hget(f"{TAG}:g", gid))  # type: ignore[arg-type]
    return g.uses, int(r.hget(f"{TAG}:gu", gid) or 0)  # type: ignore[arg-type]


def check_spent(r: redis.Redis, t: Tally) -> int:
    uses, used = uses_in_redis(r, t.gid)
    assert used <= uses, (used, uses)
    assert t.allowed <= used, f"{t.allowed} acknowledged spends, {used} recorded: one lost"
    assert used <= t.allowed + t.unavailable, (used, t)
    return used


def start(threads: list[threading.Thread]) -> None:
    for th in threads:
        th.start()


def join(threads: list[threading.Thread]) -> None:
    for th in threads:
        th.join(DEADLINE * 3)
        assert not th.is_alive(), "a client hangs on the store"


def wait_for(what: str, ok: Callable[[], bool], within: float = 20) -> None:
    deadline = time.monotonic() + within
    while not ok():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_sigkill_during_concurrent_spends_of_one_grant(server: RedisServer) -> None:
    began = time.monotonic()
    uses = 30
    stop = threading.Event()
    with sidecar(server) as s:
        with client(s.address) as c:
            tally = Tally(setup_grant(c, uses))
        threads = [
            threading.Thread(target=payer, args=(s.address, tally, stop), daemon=True)
            for _ in range(5)
        ]
        start(threads)
        wait_for("the payments made no progress", lambda: tally.allowed >= 10)
        server.stop(hard=True)  # SIGKILL while the payments spend the grant
        time.sleep(0.3)
        stop.set()
        join(threads)
        assert tally.unavailable, "no act saw the store down"
        assert not tally.other, tally.other
        server.start()  # same port and directory: the AOF
        r = server.client(decode_responses=True, socket_timeout=5)
        try:
            used = check_spent(r, tally)
            # pay on until the grant is spent: each allowed act spends one more, and the
            # payments the grant allowed, before and after the crash, never exceed it
            with client(s.address) as c:
                for _ in range(uses + 1):
                    tally.act(c)
                    if tally.denied:
                        break
            assert not tally.other and not tally.slow, tally
            assert tally.denied == 1, "the grant was never spent"
            assert check_spent(r, tally) == uses
            assert tally.allowed <= uses
            assert tally.allowed - (uses - used) <= used  # the acts after the restart
            with client(s.address) as c:
                (shown,) = [g for g in c.explain(BILL).grants if g.id == tally.gid]
                assert shown.used == uses and not shown.effective
        finally:
            r.close()
    assert time.monotonic() - began < 90


def objected_events(r: redis.Redis) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, fields in r.xrange(f"{TAG}:ev"):
        if fields.get("t") == "objected":
            out[fields["m"]] = out.get(fields["m"], 0) + 1
    return out


def check_proposals(r: redis.Redis, memories: list[str], acked: set[str]) -> None:
    """Each proposal wholly saved or not at all: postponed with one objection exactly
    when its `objected` event is there; every acknowledged objection among them."""
    events = objected_events(r)
    for m in memories:
        text = r.hget(f"{TAG}:pp", m)
        assert text, m
        p = Proposal.from_json(text)
        if p.state == POSTPONED:
            assert [o.by for o in p.objections] == [OWNER], (m, p)
            assert events.get(m) == 1, (m, p, events.get(m))
        else:
            assert not p.objections and m not in events, (m, p)
            assert m not in acked, f"acknowledged objection to {m} is lost"


def objector(
    address: str,
    memories: list[str],
    acked: set[str],
    tally: Tally,
    stop: threading.Event,
) -> None:
    """Object to each memory's proposal in turn (each once); note what was answered."""
    with client(address) as c:
        for m in memories:
            if stop.is_set():
                return
            started = time.monotonic()
            try:
                out = c.object_to(m, "still in use", actor=OWNER)
            except Unavailable:
                with tally.lock:
                    tally.unavailable += 1  # counted apart from the acts below
            except MemLineageError as err:
                with tally.lock:
                    tally.other.append(f"object {m}: {err.code.name}: {err.details}")
            else:
                assert out.proposal.state == POSTPONED
                acked.add(m)
            took = time.monotonic() - started
            if took >= BOUND:
                with tally.lock:
                    tally.slow.append(took)


def test_sigstop_during_spends_and_objections_is_unavailable_within_the_bound(
    server: RedisServer,
) -> None:
    began = time.monotonic()
    assert server.proc is not None
    pid = server.proc.pid
    memories = [f"owned{i}" for i in range(400)]
    store = open_store(server.url)
    try:
        now = time.time()
        for m in memories:
            store.record(MemoryRecord(id=m, namespace=NS, creator_id=OWNER))
            store.save_proposal(pending_for_an_hour(NS, m, now), "proposed")
    finally:
        store.close()
    stop = threading.Event()
    acked: set[str] = set()
    with sidecar(server) as s:
        with client(s.address) as c:
            tally = Tally(setup_grant(c, 100_000))
        voices = Tally(tally.gid)
        threads = [
            threading.Thread(target=payer, args=(s.address, tally, stop, 10_000), daemon=True)
            for _ in range(3)
        ] + [
            threading.Thread(
                target=objector, args=(s.address, memories, acked, voices, stop), daemon=True
            )
        ]
        start(threads)
        wait_for("no progress", lambda: tally.allowed >= 10 and len(acked) >= 10)
        os.kill(pid, signal.SIGSTOP)  # mid-spend, mid-save: whatever is in flight
        try:
            before = (tally.unavailable, voices.unavailable)
            time.sleep(3 * BOUND)  # every client keeps calling, each call bounded
            assert tally.unavailable > before[0] and voices.unavailable > before[1]
        finally:
            os.kill(pid, signal.SIGCONT)
        allowed, objected = tally.allowed, len(acked)
        wait_for("no act served after SIGCONT", lambda: tally.allowed > allowed + 5)
        wait_for("no objection served after SIGCONT", lambda: len(acked) > objected + 5)
        stop.set()
        join(threads)
        assert not tally.other and not voices.other, (tally.other, voices.other)
        assert not tally.slow and not voices.slow, (tally.slow, voices.slow)
    r = server.client(decode_responses=True, socket_timeout=5)
    try:
        check_spent(r, tally)
        check_proposals(r, memories, acked)
    finally:
        r.close()
    assert time.monotonic() - began < 90


# -- the store's own calls, each made while redis-server is stopped -----------------------


def stopped_call(server: RedisServer, store: LineageStore, call: Callable[[], object]) -> float:
    """`call` with redis-server stopped: StoreUnavailableError within the bound (the
    seconds it took); redis-server is continued afterwards."""
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError):
            call()
        took = time.monotonic() - started
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    time.sleep(0.2)  # a script left in the socket runs now, before the check reads
    assert took < BOUND, f"{took:.2f} s on a stopped store"
    return took


def test_sigstop_on_the_spend_and_the_save_themselves(server: RedisServer) -> None:
    """The spend script and the save script are the very calls the stop catches: each
    fails within the socket timeout, and after SIGCONT the store holds the grant at
    its uses before or one more, the proposal wholly saved or as it was."""
    began = time.monotonic()
    store = open_store(server.url)  # the sidecar's timeouts: 1 s to connect, 1 s to reply
    r = server.client(decode_responses=True, socket_timeout=5)
    try:
        now = time.time()
        g = store.put_grant(
            GrantRecord(
                id="g1",
                namespace=NS,
                issuer="user:alice",
                actions=("send_money",),
                memory_id=BILL,
                uses=3,
            ),
            now=now,
        )
        for round_ in range(4):  # the fourth spend would exceed the limit
            _, before = uses_in_redis(r, g.id)
            stopped_call(server, store, lambda: store.use_grants(NS, [g.id], now=now))
            _, after = uses_in_redis(r, g.id)  # the script ran after SIGCONT, or never
            assert after in (before, before + 1) and after <= 3, (round_, before, after)
        for _ in range(3):  # spend what the stopped calls left, then it is refused
            if not store.use_grants(NS, [g.id], now=now):
                break
        assert not store.use_grants(NS, [g.id], now=now)
        assert uses_in_redis(r, g.id)[1] == 3

        store.record(MemoryRecord(id="owned", namespace=NS, creator_id=OWNER), now=now)
        first = pending_for_an_hour(NS, "owned", now)
        store.save_proposal(first, "proposed", now=now)
        postponed = replace(
            first,
            state=POSTPONED,
            deadline=now + 7200,
            objections=(Objection(now, OWNER, "still in use"),),
        )
        stopped_call(server, store, lambda: store.save_proposal(postponed, "objected", now=now))
        text = r.hget(f"{TAG}:pp", "owned")
        assert text is not None
        saved = Proposal.from_json(text)
        assert saved in (first, postponed), saved
        assert objected_events(r).get("owned", 0) == (1 if saved == postponed else 0)
        # read back through the store after SIGCONT: the same, and it serves again
        assert store.proposal(NS, "owned") == saved
        store.save_proposal(postponed, "objected", now=now)
        assert json.loads(r.hget(f"{TAG}:pp", "owned") or "")[8] == POSTPONED
        assert store.proposal(NS, "owned") == postponed
    finally:
        r.close()
        store.close()
    assert time.monotonic() - began < 60

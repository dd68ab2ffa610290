"""Writers racing each other through one real sidecar, as several agent processes
writing to one sidecar do, on the embedded store, a real redis-server and a real Redis
Cluster: children recorded while their parent is revoked, Revises racing each other and
the Records of children, two memories revised onto each other at once. Afterwards the
invariants are read from the store itself (not from the answers): no child of a revoked
memory left active, derivations and dependencies agree both ways, versions and their
history agree, every acknowledged write is there, one Revise per base version. And the
sweep's eviction racing a child's Record (a hook at the racy point): never evicted under
a live child."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from memlineage.client import MemLineageClient, MemLineageError
from memlineage.config import Config
from memlineage.grpc_api.auth import TokenGrant
from memlineage.lifecycle import sweep as sweep_module
from memlineage.lifecycle.sweep import sweep
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.errors import CycleError, TransitionError
from memlineage.lineage.model import MemoryRecord
from memlineage.scoring.config import ScoringConfig
from memlineage.store import LineageStore, open_store
from memlineage.store.redis_base import RedisBase
from support.memories import T0, memory
from support.sidecar import BUNDLED_POLICIES, STORES, RunningSidecar, store_of, store_url

NS = "race"
TOKENS = (TokenGrant("tok", (NS,), name="t"),)
JOIN = 60.0  # seconds any racing thread may take before the test fails
agent = partial(memory, ns=NS, creator_id="agent:planner", creator_kind="agent", type="note")


@pytest.fixture(params=STORES)
def sidecar(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunningSidecar]:
    store = store_url(request.param, request, tmp_path)
    config = Config(policy_dir=BUNDLED_POLICIES, store=store, tokens=TOKENS, decision_log="off")
    with RunningSidecar(config, ManualClock(T0)) as s:
        yield s


def race(address: str, jobs: list[Callable[[MemLineageClient], Any]]) -> list[Any]:
    """Run every job at once, each on its own thread and client, released together;
    returns each job's answer or the MemLineageError it raised (anything else fails)."""
    clients = [MemLineageClient(address, token="tok", namespace=NS, timeout=30) for _ in jobs]
    start = threading.Barrier(len(jobs))
    out: list[Any] = [None] * len(jobs)

    def run(i: int) -> None:
        start.wait(JOIN)
        try:
            out[i] = jobs[i](clients[i])
        except MemLineageError as exc:
            out[i] = exc
        except BaseException as exc:  # reported below, with the job
            out[i] = ("unexpected", exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN)
    try:
        assert not any(t.is_alive() for t in threads), "a racing call did not return"
        unexpected = [o for o in out if isinstance(o, tuple) and o and o[0] == "unexpected"]
        assert not unexpected, unexpected
        return out
    finally:
        for c in clients:
            c.close()


def everything(store: LineageStore, ids: list[str]) -> dict[str, MemoryRecord]:
    return store.get_many(NS, ids, with_history=True)


def check_links(held: dict[str, MemoryRecord]) -> None:
    """Each derivation link is the dependency seen from the other end, both ways."""
    for rid, rec in held.items():
        for d in rec.dependencies:
            assert isinstance(d, str)
            if d in held:
                assert rid in held[d].derivations, (rid, d, held[d].derivations)
        for child in rec.derivations:
            assert child in held, (rid, child)
            assert rid in held[child].dependencies, (rid, child, held[child].dependencies)
        assert len(set(rec.derivations)) == len(rec.derivations), (rid, rec.derivations)


def test_children_recorded_while_the_parent_is_revoked(sidecar: RunningSidecar) -> None:
    """A child recorded on P while P is revoked, and a grandchild on it, end
    pending_verification (or were refused), never active under a revoked P."""
    store = store_of(sidecar)
    with MemLineageClient(sidecar.address, token="tok", namespace=NS) as c:
        for round_ in range(6):
            p = f"p{round_}"
            assert c.record(p, creator="user:alice").recorded
            pre = [f"{p}-pre{i}" for i in range(4)]
            for x in pre:  # already there: the cascade has descendants to walk
                assert c.record(x, creator="agent:planner", dependencies=[p]).recorded
            kids = [f"{p}-c{i}" for i in range(10)]

            def child(x: str, on: str) -> Callable[[MemLineageClient], Any]:
                def job(cl: MemLineageClient) -> Any:
                    got = cl.record(x, creator="agent:planner", dependencies=[on])
                    grand = cl.record(f"{x}-g", creator="agent:planner", dependencies=[x])
                    return got, grand

                return job

            jobs: list[Callable[[MemLineageClient], Any]] = [
                child(x, pre[i % len(pre)] if i % 2 else p) for i, x in enumerate(kids)
            ]
            jobs.insert(5, lambda cl, p=p: cl.revoke(p, reason="wrong"))
            out = race(sidecar.address, jobs)
            assert not isinstance(out[5], Exception), out[5]
            ids = [p, *pre, *kids, *(f"{x}-g" for x in kids)]
            held = everything(store, ids)
            assert held[p].status == "revoked"
            acked = [
                x
                for x, o in zip(kids, out[:5] + out[6:], strict=True)
                if not isinstance(o, Exception) and o[0].recorded
            ]
            for x in acked:
                assert x in held, f"acknowledged Record of {x} is missing"
            active = [x for x, r in held.items() if x != p and r.status == "active"]
            assert active == [], {x: held[x].status_history for x in active}
            check_links(held)
            check_no_active_on_tainted(held)


def test_two_revises_of_one_version(sidecar: RunningSidecar) -> None:
    """Of Revises racing from the same base version, exactly one is applied."""
    store = store_of(sidecar)
    with MemLineageClient(sidecar.address, token="tok", namespace=NS) as c:
        assert c.record("base", creator="agent:planner").recorded
        assert c.record("m", creator="agent:planner").recorded
        for v in range(1, 7):

            def rev(tag: str, v: int = v) -> Callable[[MemLineageClient], Any]:
                return lambda cl: cl.revise(
                    "m",
                    expected_version=v,
                    creator="agent:planner",
                    tags=[tag],
                    dependencies=["base"] if tag.endswith("0") else [],
                )

            out = race(sidecar.address, [rev(f"t{v}-{i}") for i in range(4)])
            won = [o for o in out if not isinstance(o, Exception) and o.applied]
            assert len(won) == 1, out
            held = everything(store, ["m", "base"])
            assert held["m"].version == v + 1
            assert held["m"].tags == tuple(won[0].memory.tags)
            check_links(held)
        kept = store.versions(NS, "m")
        assert [k.version for k in kept] == [6, 5, 4, 3, 2, 1]


def test_revise_while_children_are_recorded(sidecar: RunningSidecar) -> None:
    """Revises of M racing Records of its children: the links agree both ways, every
    acknowledged child is there, every child recorded before the last Revise is pending."""
    store = store_of(sidecar)
    with MemLineageClient(sidecar.address, token="tok", namespace=NS) as c:
        assert c.record("a", creator="agent:planner").recorded
        assert c.record("b", creator="agent:planner").recorded
        assert c.record("m", creator="agent:planner", dependencies=["a"]).recorded
        applied = 0
        for round_ in range(5):
            v = store.get(NS, "m").version

            def kid(i: int, r: int = round_) -> Callable[[MemLineageClient], Any]:
                return lambda cl: cl.record(
                    f"k{r}-{i}", creator="agent:planner", dependencies=["m"]
                )

            deps = ["a", "b"] if round_ % 2 == 0 else ["b"]
            jobs = [kid(i) for i in range(8)]
            jobs.insert(
                4,
                lambda cl, v=v, deps=deps: cl.revise(
                    "m", expected_version=v, creator="agent:planner", dependencies=deps
                ),
            )
            out = race(sidecar.address, jobs)
            assert not isinstance(out[4], Exception), out[4]
            applied += 1
        ids = ["a", "b", "m", *(f"k{r}-{i}" for r in range(5) for i in range(8))]
        held = everything(store, ids)
        assert all(i in held for i in ids)
        check_links(held)
        assert sorted(held["m"].derivations) == sorted(i for i in ids if i.startswith("k"))
        assert held["m"].version == 1 + applied
        assert [k.version for k in store.versions(NS, "m")] == list(range(applied, 0, -1))


def test_two_memories_revised_onto_each_other(sidecar: RunningSidecar) -> None:
    """Revise x onto y and y onto x at once: at most one applies, the graph stays a DAG."""
    store = store_of(sidecar)
    with MemLineageClient(sidecar.address, token="tok", namespace=NS) as c:
        for r in range(6):
            x, y = f"x{r}", f"y{r}"
            assert c.record(x, creator="agent:planner").recorded
            assert c.record(y, creator="agent:planner").recorded
            out = race(
                sidecar.address,
                [
                    lambda cl, x=x, y=y: cl.revise(
                        x, expected_version=1, creator="agent:planner", dependencies=[y]
                    ),
                    lambda cl, x=x, y=y: cl.revise(
                        y, expected_version=1, creator="agent:planner", dependencies=[x]
                    ),
                ],
            )
            held = everything(store, [x, y])
            assert not (x in held[y].dependencies and y in held[x].dependencies), out
            check_links(held)


TAINTED = {"pending_verification", "revoked", "superseded"}


def check_no_active_on_tainted(held: dict[str, MemoryRecord]) -> None:
    """With no Confirm among the writes, an active memory has no tainted dependency."""
    bad = {
        rid: [(d, held[d].status) for d in r.dependencies if isinstance(d, str) and d in held]
        for rid, r in held.items()
        if r.status == "active"
        and any(
            isinstance(d, str) and d in held and held[d].status in TAINTED for d in r.dependencies
        )
    }
    assert bad == {}, {rid: (bad[rid], held[rid].status_history) for rid in bad}


def test_claims_recorded_at_once(sidecar: RunningSidecar) -> None:
    """New values of one claim racing each other, children of the holders and a Revise of
    a holder: one holder left live, the others superseded, no child active on them."""
    store = store_of(sidecar)
    with MemLineageClient(sidecar.address, token="tok", namespace=NS) as c:
        assert c.record("city0", creator="user:alice", claim=("user:alice", "city", "v0")).recorded
        ids = ["city0"]
        for r in range(1, 6):
            holder = store.current_claim(NS, "user:alice", "city")
            assert holder is not None
            jobs: list[Callable[[MemLineageClient], Any]] = []
            for i in range(3):
                cid = f"city{r}-{i}"
                ids.append(cid)
                jobs.append(
                    lambda cl, cid=cid, v=f"v{r}-{i}": cl.record(
                        cid, creator="user:alice", claim=("user:alice", "city", v)
                    )
                )
            for i in range(4):
                kid = f"hk{r}-{i}"
                ids.append(kid)
                jobs.append(
                    lambda cl, kid=kid, h=holder.id: cl.record(
                        kid, creator="agent:planner", dependencies=[h]
                    )
                )
            race(sidecar.address, jobs)
            held = everything(store, ids)
            live = [
                i for i in ids if held.get(i) and held[i].claim and held[i].status not in TAINTED
            ]
            assert len(live) == 1, {i: held[i].status for i in ids if i in held and held[i].claim}
            now = store.current_claim(NS, "user:alice", "city")
            assert now is not None and now.id == live[0]
            check_links(held)
            check_no_active_on_tainted(held)


def test_revise_racing_a_revoke_of_its_dependency(sidecar: RunningSidecar) -> None:
    """Revise C (keeping or dropping P) while P is revoked and children of C are
    recorded: C is active only without P, and nothing active rests on a tainted memory."""
    store = store_of(sidecar)
    with MemLineageClient(sidecar.address, token="tok", namespace=NS) as c:
        ids: list[str] = []
        for r in range(8):
            p, q, cm = f"rp{r}", f"rq{r}", f"rc{r}"
            assert c.record(p, creator="user:alice").recorded
            assert c.record(q, creator="user:alice").recorded
            assert c.record(cm, creator="agent:planner", dependencies=[p]).recorded
            ids += [p, q, cm]
            keep = [p, q] if r % 2 else [q]
            jobs: list[Callable[[MemLineageClient], Any]] = [
                lambda cl, p=p: cl.revoke(p, reason="wrong"),
                lambda cl, cm=cm, keep=keep: cl.revise(
                    cm, expected_version=1, creator="agent:planner", dependencies=keep
                ),
            ]
            for i in range(4):
                kid = f"{cm}-k{i}"
                ids.append(kid)
                jobs.append(
                    lambda cl, kid=kid, cm=cm: cl.record(
                        kid, creator="agent:planner", dependencies=[cm]
                    )
                )
            race(sidecar.address, jobs)
            held = everything(store, ids)
            assert held[p].status == "revoked"
            check_links(held)
            check_no_active_on_tainted(held)


DAY = 86400.0


@pytest.fixture(params=["embedded", "redis", "cluster"])
def swept(request: pytest.FixtureRequest) -> Iterator[tuple[LineageStore, ManualClock]]:
    """A store holding `gone`, archived by the sweep and idle long enough to be evicted."""
    url = "embedded"
    if request.param != "embedded":
        fixture = "redis_cluster" if request.param == "cluster" else "redis_server"
        url = request.getfixturevalue(fixture).emptied()
    clock = ManualClock(T0)
    store = open_store(url, clock=clock)
    try:
        store.record(agent("gone"))
        clock.advance(30 * DAY)
        moved = sweep(store, ScoringConfig(), clock(), namespace=NS).transitions
        assert [(t.memory_id, t.to_status) for t in moved] == [("gone", "archived")]
        clock.advance(31 * DAY)
        yield store, clock
    finally:
        store.close()


def test_the_sweep_never_evicts_under_a_child_recorded_meanwhile(
    swept: tuple[LineageStore, ManualClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent records a child of `gone` after the sweep found it without live
    derivations and before it evicts it: the eviction is refused (it is reviewed again
    soon), `gone` stays archived under its active child. Before, `gone` was evicted
    with an active derivation, the very case the sweep refuses."""
    store, clock = swept
    found = sweep_module._eviction_blocker

    def blocker_then_a_child(s: LineageStore, rec: MemoryRecord) -> str | None:
        out = found(s, rec)
        s.record(agent("child", "gone"))  # another agent's Record, at this instant
        return out

    monkeypatch.setattr(sweep_module, "_eviction_blocker", blocker_then_a_child)
    report = sweep(store, ScoringConfig(), clock(), namespace=NS)
    assert report.transitions == []
    assert [(t.memory_id, t.to_status, t.reason) for t in report.refused] == [
        (
            "gone",
            "evicted",
            "status: memory 'gone' has live derivations (child): not evicted [INVALID_TRANSITION]",
        )
    ]
    held = store.get_many(NS, ["gone", "child"])
    assert (held["gone"].status, held["gone"].derivations) == ("archived", ("child",))
    assert (held["child"].status, held["child"].dependencies) == ("active", ("gone",))


def test_evict_reads_the_derivations_with_the_change(
    swept: tuple[LineageStore, ManualClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child recorded inside `evict` itself, after a Redis store read the derivation
    list and before its script runs, still refuses the eviction (the script names the
    child it was not given, and the call retries with it); a dead child does not."""
    store, clock = swept
    store.record(agent("old", "gone"))
    store.revoke(NS, "old")  # not live: evicting over it is allowed
    if isinstance(store, RedisBase):
        run = store._run
        calls: list[str] = []

        def run_after_a_child(name: str, *args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            if name == "set_status" and calls.count("set_status") == 1:
                store.record(agent("child", "gone"))
            return run(name, *args, **kwargs)

        monkeypatch.setattr(store, "_run", run_after_a_child)
    else:  # one lock: a Record waits until the eviction is answered
        store.record(agent("child", "gone"))
    with pytest.raises(TransitionError, match=r"has live derivations \(child\)"):
        store.evict(NS, "gone", reason="idle", now=clock())
    assert store.get(NS, "gone").status == "archived"
    store.revoke(NS, "child")
    assert store.evict(NS, "gone", reason="idle", now=clock()).root.status == "evicted"
    assert [c.to_status for c in store.get(NS, "gone").status_history][-1] == "evicted"


@pytest.fixture(params=["redis", "cluster"])
def redis_store(request: pytest.FixtureRequest) -> Iterator[RedisBase]:
    fixture = "redis_cluster" if request.param == "cluster" else "redis_server"
    url = request.getfixturevalue(fixture).emptied()
    store = open_store(url, clock=ManualClock(T0))
    assert isinstance(store, RedisBase)
    try:
        yield store
    finally:
        store.close()


def revision(memory_id: str, *deps: str, tag: str) -> MemoryRecord:
    return agent(memory_id, *deps, tags=(tag,))


def test_a_revise_adding_no_dependency_is_not_starved_by_other_revises(
    redis_store: RedisBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer's Revise lands between each attempt's read of the graph epoch and
    its script (a hook at that point, every time): a Revise adding no dependency closes
    no cycle and is applied at once; one adding a dependency still checks again and
    refuses the cycle the other writer closed meanwhile. Before, the first was retried
    32 times and answered UNAVAILABLE ("the namespace graph kept changing")."""
    store = redis_store
    for m in ("m", "other", "x", "y"):
        store.record(agent(m))
    run = store._run
    busy: list[str] = []

    def another_revise_first(name: str, keys: list[str], args: list[Any], *rest: Any) -> Any:
        if name == "revise" and args[0] == "m" and not busy:
            busy.append("x")
            other = store.get(NS, "other")
            store.revise(revision("other", tag="b"), expected_version=other.version)
            busy.clear()
        return run(name, keys, args, *rest)

    monkeypatch.setattr(store, "_run", another_revise_first)
    out = store.revise(revision("m", tag="a"), expected_version=1)
    assert (out.memory.version, out.memory.tags) == (2, ("a",))
    assert store.get(NS, "other").version == 2  # the hook ran once: applied at once
    assert [v.version for v in store.versions(NS, "m")] == [1]

    def a_cycle_first(name: str, keys: list[str], args: list[Any], *rest: Any) -> Any:
        if name == "revise" and args[0] == "x" and not busy:
            busy.append("y")
            store.revise(revision("y", "x", tag="c"), expected_version=1)
        return run(name, keys, args, *rest)

    monkeypatch.setattr(store, "_run", a_cycle_first)
    with pytest.raises(CycleError, match="x -> y -> x"):
        store.revise(revision("x", "y", tag="d"), expected_version=1)
    held = store.get_many(NS, ["x", "y"])
    assert (held["x"].dependencies, held["y"].dependencies) == ((), ("x",))

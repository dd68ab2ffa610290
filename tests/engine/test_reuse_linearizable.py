"""Decision reuse is linearizable against changes: a change acknowledged to its caller
while a decision sits between its store read and being kept (the racy point of
reuse) is never answered past. The decision is kept under the counters (Redis) or
the change mark (embedded) read BEFORE the store was, so the same request asked
after the acknowledgment is decided afresh, as is a Check reissued from its ticket.

A hook on the real store lands the change exactly there, from another thread (a
second client), and waits for its acknowledgment: a tag read after the lineage (or
when the decision is kept) would pass for the change and reuse the ALLOW."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.model import MemoryRecord
from memlineage.store import open_store
from memlineage.store.base import LineageStore
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.decision import ALLOW, DENY
from memlineage_dsl.facts import Creator
from support.redis_servers import RedisClusterHandle, RedisServer
from support.sidecar import BUNDLED_POLICIES

NS = "default"
USER = Creator("user", "user:alice")
# A set that newly denies every memory of the context the tests record in.
DENYING = """policy racing_reload priority 99 {
  on read, derive, act
  when memory.context_id == "racing"
  deny "reloaded while the decision was taken"
}
"""


@pytest.fixture(params=["embedded", "redis", "cluster"])
def store(request: pytest.FixtureRequest) -> Iterator[LineageStore]:
    if request.param == "embedded":
        s: LineageStore = EmbeddedStore()
    elif request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        s = open_store(server.emptied())
    else:
        cluster: RedisClusterHandle = request.getfixturevalue("redis_cluster")
        s = open_store(cluster.emptied())
    yield s
    s.close()


def _engine(store: LineageStore) -> Engine:
    engine = Engine(store, PolicyHolder(BUNDLED_POLICIES), record_access=False)
    for mid, deps in (("root", ()), ("mid", ("root",)), ("leaf", ("mid",))):
        rec = MemoryRecord(
            id=mid,
            namespace=NS,
            creator_kind="user",
            creator_id="user:alice",
            creator_confidence=0.95,
            dependencies=deps,
            context_id="racing",
        )
        assert engine.record(rec).recorded, mid
    return engine


def _after_next_read(store: LineageStore, change: Callable[[], Any]) -> list[Any]:
    """Run `change` once, on another thread, right after the store's next lineage read
    returns (before the decision that read it is taken and kept), and wait for it to
    be acknowledged; its result is appended to the list returned."""
    real = store.lineage_view
    done: list[Any] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(change())
        except BaseException as exc:  # raised on the deciding thread, below
            failed.append(exc)

    def hooked(*args: Any, **kwargs: Any) -> Any:
        view = real(*args, **kwargs)
        if not done:
            done.append(None)  # the change's own reads pass through
            worker = threading.Thread(target=run)
            worker.start()
            worker.join(20)
            assert not worker.is_alive(), "the change was not acknowledged in 20 s"
            store.lineage_view = real  # type: ignore[method-assign]
            if failed:
                raise failed[0]
        return view

    store.lineage_view = hooked  # type: ignore[method-assign]
    return done


def _revoke(engine: Engine, mid: str) -> Callable[[], Any]:
    def change() -> Any:
        result = engine.update_status(NS, mid, "revoke", USER, reason="wrong")
        assert result.applied
        return result

    return change


@pytest.mark.parametrize("asked", ["root", "leaf"])
def test_a_check_after_a_racing_revoke_is_decided_afresh(store: LineageStore, asked: str) -> None:
    engine = _engine(store)
    changed = _after_next_read(store, _revoke(engine, "root"))
    raced, ticket = engine.check_ticketed(NS, "read", [asked], USER)
    assert len(changed) == 2, "the revoke did not land between the read and the keep"
    # decided on what it read before the revoke: concurrent with it, so either is right;
    # ALLOW here is what makes the next request's answer depend on the kept tag
    assert raced.decision.effect == ALLOW
    assert ticket is not None  # kept for reuse
    after = engine.check(NS, "read", [asked], USER)
    assert after.decision.effect != ALLOW, after.decision
    if asked == "root":
        assert after.decision.effect == DENY
    assert engine.reissue(ticket) is None  # the servicer's memo asks this first


def test_a_filter_rank_after_a_racing_revoke_is_decided_afresh(store: LineageStore) -> None:
    engine = _engine(store)
    changed = _after_next_read(store, _revoke(engine, "root"))
    raced = engine.filter_rank(NS, [("root", 0.9), ("leaf", 0.8)], USER)
    assert len(changed) == 2
    assert [c.decision.decision.effect for c in raced] == [ALLOW, ALLOW]
    after = engine.filter_rank(NS, [("root", 0.9), ("leaf", 0.8)], USER)
    assert [c.kept for c in after] == [False, True]  # the leaf kept, degraded
    assert after[0].decision.decision.effect == DENY
    assert after[1].decision.decision.effect != ALLOW


def test_a_check_after_a_racing_revision_is_decided_afresh(store: LineageStore) -> None:
    engine = _engine(store)
    doubtful = MemoryRecord(
        id="root",
        namespace=NS,
        creator_kind="reasoning",
        creator_id="reasoning:planner",
        creator_confidence=0.1,
        context_id="racing",
    )

    def revise() -> Any:
        result = engine.revise(doubtful, 1, USER)
        assert result.applied, result
        return result

    changed = _after_next_read(store, revise)
    raced, ticket = engine.check_ticketed(NS, "read", ["root"], USER)
    assert len(changed) == 2 and raced.decision.effect == ALLOW and ticket is not None
    assert engine.check(NS, "read", ["root"], USER).decision.effect == DENY
    assert engine.check(NS, "read", ["leaf"], USER).decision.effect != ALLOW
    assert engine.reissue(ticket) is None


def test_a_check_after_a_racing_reload_is_decided_afresh(store: LineageStore) -> None:
    engine = _engine(store)
    files = {p.name: p.read_text() for p in Path(BUNDLED_POLICIES).glob("*.mlp")}

    def reload() -> Any:
        outcome = engine.policies.reload({**files, "racing.mlp": DENYING})
        assert outcome.applied, outcome
        return outcome

    changed = _after_next_read(store, reload)
    raced, ticket = engine.check_ticketed(NS, "read", ["mid"], USER)
    assert len(changed) == 2 and raced.decision.effect == ALLOW and ticket is not None
    assert engine.check(NS, "read", ["mid"], USER).decision.effect == DENY
    assert engine.reissue(ticket) is None


def test_a_fresh_check_after_a_racing_feedback_reads_the_new_credibility(
    store: LineageStore,
) -> None:
    """Reuse off (or closed: a shadow candidate loaded, a policy not time-exact), a
    Redis sidecar keeps its sources' credibility a second (no counter to key it on),
    dropped when it writes their statistics. A decision that read them before a
    Feedback and kept them after the drop made the next decisions, after the
    Feedback was acknowledged, use the credibility from before it for that second
    (DEGRADE where the failure made it DENY): kept only when no drop came since."""
    source = "tool:quotes"
    probe = Engine(store, PolicyHolder(BUNDLED_POLICIES), record_access=False, credibility_ttl=0)
    memory = MemoryRecord(
        id="quote",
        namespace="probe",
        creator_kind="tool",
        creator_id=source,
        creator_confidence=0.9,
    )
    assert probe.record(memory).recorded
    before = probe.filter_rank("probe", [("quote", 1.0)], USER)[0].reliability
    probe.feedback("probe", "", ["quote"], False)
    after = probe.filter_rank("probe", [("quote", 1.0)], USER)[0].reliability
    assert after < before
    files = {p.name: p.read_text() for p in Path(BUNDLED_POLICIES).glob("*.mlp")}
    files["failing.mlp"] = (
        f'policy failing priority 99 {{\n  on read\n  when memory.creator.id == "{source}"'
        f' and memory.reliability < {(before + after) / 2!r}\n  deny "it failed"\n}}\n'
    )
    holder = PolicyHolder(BUNDLED_POLICIES)
    assert holder.reload(files).applied
    engine = Engine(store, holder, record_access=False, reuse_decisions=False)
    assert engine.record(dataclasses.replace(memory, namespace=NS)).recorded

    real = store.source_stats
    done: list[Any] = []

    def hooked(*args: Any, **kwargs: Any) -> Any:
        stats = real(*args, **kwargs)
        if not done:  # the Feedback lands after the read, acknowledged before the keep
            worker = threading.Thread(
                target=lambda: done.append(engine.feedback(NS, "", ["quote"], False))
            )
            worker.start()
            worker.join(20)
            assert done == [1], "the feedback was not acknowledged in 20 s"
            store.source_stats = real  # type: ignore[method-assign]
        return stats

    store.source_stats = hooked  # type: ignore[method-assign]
    raced = engine.check(NS, "read", ["quote"], USER)
    assert done == [1]
    assert raced.decision.effect != DENY  # decided on the statistics before the failure
    assert engine.check(NS, "read", ["quote"], USER).decision.effect == DENY

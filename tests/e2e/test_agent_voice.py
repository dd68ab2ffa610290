"""The agent's voice in governance, through a real sidecar on the embedded store and
a real redis-server: before the sweep archives a memory an agent owns, its owners
(two here: the creator and an `owner:` tag) hear a `proposed` event with a deadline
on Watch; an owner's objection postpones it (kept in Explain's history, counted as a
successful use), a non-owner cannot object, objections are bounded, and with no
objection the transition happens as it did before."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from memlineage.client import MemLineageClient
from memlineage.client.errors import FailedPrecondition, InvalidArgument, PermissionDenied
from memlineage.config import Config
from memlineage.lineage.clock import ManualClock
from memlineage.scoring.config import ScoringConfig
from memlineage.v1 import memlineage_pb2 as pb
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

DAY = 86400.0
WINDOW, POSTPONE = 3600.0, 2 * DAY


@pytest.fixture(params=["embedded", "redis"])
def voice(request: pytest.FixtureRequest) -> Iterator[tuple[MemLineageClient, ManualClock]]:
    store = "embedded"
    if request.param == "redis":
        store = request.getfixturevalue("redis_server").emptied()
    scoring = replace(
        ScoringConfig(), objection_window=WINDOW, objection_postpone=POSTPONE, max_objections=2
    )
    config = Config(policy_dir=BUNDLED_POLICIES, store=store, scoring=scoring, sweep_interval=0.0)
    clock = ManualClock(T0)
    with RunningSidecar(config, clock) as s, MemLineageClient(s.address, timeout=10) as c:
        yield c, clock


class Events:
    """The namespace's Watch stream, from its oldest event, collected in a thread."""

    def __init__(self, client: MemLineageClient) -> None:
        self.seen: list[pb.LineageEvent] = []
        self.stream = client.watch(from_oldest=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for e in self.stream:
                self.seen.append(e)
        except Exception:  # cancelled
            return

    def wait(self, holds: Callable[[list[pb.LineageEvent]], bool]) -> list[pb.LineageEvent]:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not holds(self.seen):
            time.sleep(0.05)
        assert holds(self.seen), [(e.type, e.memory_id) for e in self.seen]
        return list(self.seen)

    def close(self) -> None:
        self.stream.cancel()
        self.thread.join(5)


def _moved(report: pb.RunSweepResponse, field: str) -> dict[str, int]:
    return {t.memory_id: t.to_status for t in getattr(report, field)}


def test_owners_hear_object_and_the_sweep_waits(voice: tuple) -> None:
    c, clock = voice
    made = c.record("shared", creator="agent:alpha", tags=["owner:agent:beta"])
    for _ in range(3):  # failed uses: its value stays low even with an objection's use
        c.feedback(made.decision.decision_id, ["shared"], success=False)
    c.record("lonely", creator="agent:gamma")
    c.record("tool-note", creator="tool:flight_api")
    events = Events(c)
    try:
        clock.advance(60 * DAY)  # idle memories settle below archive_below
        first = c.run_sweep()
        assert _moved(first, "transitions") == {"tool-note": pb.STATUS_ARCHIVED}  # no owner
        assert _moved(first, "proposed") == {
            "shared": pb.STATUS_ARCHIVED,
            "lonely": pb.STATUS_ARCHIVED,
        }
        heard = events.wait(lambda es: sum(e.type == "proposed" for e in es) == 2)
        shared = next(e for e in heard if e.type == "proposed" and e.memory_id == "shared")
        assert set(shared.affected_ids) == {"agent:alpha", "agent:beta"}
        assert shared.status == pb.STATUS_ARCHIVED and shared.previous_status == pb.STATUS_ACTIVE
        assert shared.deadline.seconds == int(clock() + WINDOW)

        with pytest.raises(PermissionDenied):
            c.object_to("shared", "not mine", actor="agent:gamma")
        with pytest.raises(InvalidArgument):
            c.object_to("shared", "  ", actor="agent:beta")
        with pytest.raises(InvalidArgument) as bad:  # before: stored verbatim, shown by Explain
            c.object_to("shared", "keep\x00\x1b[2J\nFAKE LOG LINE", actor="agent:beta")
        assert bad.value.details == "reason: must not contain control characters (U+0000)"
        got = c.object_to("shared", "the trip is next month", actor="agent:beta")
        assert got.proposal.state == "postponed" and got.proposal.objections_left == 1
        assert got.proposal.deadline.seconds == int(clock() + POSTPONE)
        events.wait(lambda es: any(e.type == "objected" for e in es))

        clock.advance(WINDOW + 1)
        second = c.run_sweep()
        assert _moved(second, "transitions") == {"lonely": pb.STATUS_ARCHIVED}  # nobody objected
        ex = c.explain("shared")
        assert ex.memory.status == pb.STATUS_ACTIVE and ex.memory.uses_ok == 1  # a use
        assert ex.proposal.state == "postponed"
        assert [o.by for o in ex.proposal.objections] == ["agent:beta"]
        assert any(
            "objection by agent:beta: the trip is next month" in h.reason for h in ex.memory.history
        )

        # Past the postponement it is proposed again; objections are bounded (2 here).
        clock.advance(POSTPONE)
        assert "shared" in _moved(c.run_sweep(), "proposed")
        c.object_to("shared", "still needed", actor="agent:alpha")
        clock.advance(POSTPONE + 1)
        assert "shared" in _moved(c.run_sweep(), "proposed")
        with pytest.raises(FailedPrecondition):
            c.object_to("shared", "once more", actor="agent:alpha")
        clock.advance(WINDOW + 1)
        last = c.run_sweep()
        assert _moved(last, "transitions") == {"shared": pb.STATUS_ARCHIVED}
        assert not c.explain("shared").HasField("proposal")  # settled
    finally:
        events.close()


def test_no_objection_window_means_no_proposals(redis_server: object) -> None:
    config = Config(policy_dir=BUNDLED_POLICIES, sweep_interval=0.0)
    clock = ManualClock(T0)
    with RunningSidecar(config, clock) as s, MemLineageClient(s.address, timeout=10) as c:
        c.record("mine", creator="agent:alpha")
        clock.advance(60 * DAY)
        report = c.run_sweep()
        assert _moved(report, "transitions") == {"mine": pb.STATUS_ARCHIVED}
        assert not report.proposed
        with pytest.raises(FailedPrecondition):
            c.object_to("mine", "too late", actor="agent:alpha")

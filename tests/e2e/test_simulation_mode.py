"""Simulation mode through a real sidecar: a request's stated time is refused past
`max_future_seconds` unless the server was started with `simulation = true`, where
it moves the server's clock forward instead, so a request without a time sees the
advanced clock, and a time before the clock is refused."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest
from memlineage.client import InvalidArgument, MemLineageClient
from memlineage.config import Config, ConfigError, TokenGrant
from memlineage.lineage.clock import ManualClock, system_clock
from memlineage.v1 import memlineage_pb2 as pb
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

HOUR = 3600.0


def _record_price(ml: MemLineageClient, memory_id: str, at: float | None) -> None:
    out = ml.record(memory_id, creator="tool:flight_api", tags=["flight_price"], at=at)
    assert out.recorded


def _stale(decision: pb.Decision) -> bool:
    """Seen as more than an hour old by the bundled price rule."""
    return decision.effect == pb.EFFECT_DEGRADE and "freshest_flight_price" in [
        r.policy for r in decision.reasons
    ]


def memlineage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memlineage", *args], capture_output=True, text=True, timeout=60
    )


def _loops(s: RunningSidecar) -> list[str]:
    """The background loops the sidecar runs, by function name."""
    assert s.sidecar is not None
    return [getattr(t.get_coro(), "__name__", "") for t in s.sidecar.tasks]


def test_without_simulation_a_time_past_the_limit_is_refused_with_its_field() -> None:
    clock = ManualClock(T0)
    with RunningSidecar(Config(policy_dir=BUNDLED_POLICIES, decision_log="off"), clock) as s:
        with MemLineageClient(s.address) as ml:
            _record_price(ml, "price", None)
            with pytest.raises(InvalidArgument) as caught:
                ml.check("read", "price", at=T0 + 2 * HOUR)
            assert caught.value.details.startswith("time: is more than 300 s ahead")
            assert "max_future_seconds" in caught.value.details
            # Within the limit, and in the past: decided at that time, clock unmoved.
            assert not _stale(ml.check("read", "price", at=T0 + 299))
            assert ml.check("read", "price", at=T0 - HOUR).effect != pb.EFFECT_DENY
            assert clock() == T0
        assert "_sweep_forever" in _loops(s)


def test_max_future_seconds_is_a_setting() -> None:
    config = Config(policy_dir=BUNDLED_POLICIES, decision_log="off", max_future_seconds=3 * HOUR)
    with RunningSidecar(config, ManualClock(T0)) as s, MemLineageClient(s.address) as ml:
        _record_price(ml, "price", None)
        assert _stale(ml.check("read", "price", at=T0 + 2 * HOUR))
        assert not _stale(ml.check("read", "price"))  # the clock did not move
        with pytest.raises(InvalidArgument, match="more than 10800 s ahead"):
            ml.check("read", "price", at=T0 + 4 * HOUR)


def test_simulation_moves_the_clock_with_the_requests_times() -> None:
    clock = ManualClock(T0)
    config = Config(policy_dir=BUNDLED_POLICIES, decision_log="off", simulation=True)
    with RunningSidecar(config, clock) as s, MemLineageClient(s.address) as ml:
        _record_price(ml, "price", T0)
        assert not _stale(ml.check("read", "price"))
        # Two hours later, stated: the price is seen as two hours old ...
        assert _stale(ml.check("read", "price", at=T0 + 2 * HOUR))
        assert clock() == T0 + 2 * HOUR
        # ... and by the next request, which states no time.
        assert _stale(ml.check("read", "price"))
        # A memory recorded now is created at the advanced time, and fresh.
        _record_price(ml, "price-2", None)
        assert ml.explain("price-2").memory.created_at.ToSeconds() == T0 + 2 * HOUR
        assert not _stale(ml.check("read", "price-2"))
        # Far beyond max_future_seconds is fine; going back is not.
        assert _stale(ml.check("read", "price-2", at=T0 + 30 * 24 * HOUR))
        with pytest.raises(InvalidArgument) as caught:
            ml.check("read", "price", at=T0 + 3 * HOUR)
        assert caught.value.details == (
            "time: 2026-01-01T03:00:00Z is before the simulation clock "
            "(2026-01-31T00:00:00Z): simulated time only moves forward"
        )
        assert clock() == T0 + 30 * 24 * HOUR
        # No background sweep runs on the caller's clock; a RunSweep at a stated time
        # moves it like any other request.
        assert "_sweep_forever" not in _loops(s)
        ml.run_sweep("", 100, at=T0 + 60 * 24 * HOUR)
        assert clock() == T0 + 60 * 24 * HOUR
        # the same from a shell: `memlineage sweep --at` (before: no time flag, so a
        # script's sweep could only run at the clock already reached)
        at = datetime.fromtimestamp(T0 + 90 * 24 * HOUR, UTC)
        out = memlineage("sweep", "--target", s.address, "--at", at.isoformat())
        assert out.returncode == 0 and "examined 2, 2 moved, 0 refused" in out.stdout, out
        assert clock() == T0 + 90 * 24 * HOUR
        naive = memlineage("sweep", "--target", s.address, "--at", "2026-04-01T00:00:00")
        assert naive.returncode == 2 and "has no time zone (end it with Z)" in naive.stderr
        direct = memlineage("sweep", "--store", "embedded:///nowhere", "--at", at.isoformat())
        assert (direct.returncode, direct.stderr) == (
            2,
            "error: --at: a sweep at another time runs on a sidecar serving --simulation, "
            "not on a store directly\n",
        )


def test_one_tenant_moves_every_tenants_clock_to_9999() -> None:
    """What docs/simulation.md warns of: the clock is the server's, so a tenant stating
    the last Timestamp decides every other tenant's requests then, for good."""
    end = 253_402_300_799.0  # 9999-12-31T23:59:59Z
    clock = ManualClock(T0)
    tokens = (TokenGrant("ta", ("a",)), TokenGrant("tb", ("b",)))
    config = Config(policy_dir=BUNDLED_POLICIES, decision_log="off", simulation=True, tokens=tokens)
    with (
        RunningSidecar(config, clock) as s,
        MemLineageClient(s.address, token="ta", namespace="a") as a,
        MemLineageClient(s.address, token="tb", namespace="b") as b,
    ):
        _record_price(b, "price", None)
        assert not _stale(b.check("read", "price"))
        a.check("read", "nothing-of-b", at=end)  # a tenant's own namespace, any memory
        assert clock() == end
        assert _stale(b.check("read", "price"))  # b's price, 8,000 years old
        with pytest.raises(InvalidArgument, match="before the simulation clock"):
            b.check("read", "price", at=T0 + HOUR)


def test_simulation_starts_from_the_wall_clock_and_stays_there() -> None:
    config = Config(policy_dir=BUNDLED_POLICIES, decision_log="off", simulation=True)
    with RunningSidecar(config, system_clock) as s, MemLineageClient(s.address) as ml:
        assert s.sidecar is not None
        engine_clock = s.sidecar.engine.clock
        assert isinstance(engine_clock, ManualClock)
        start = engine_clock()
        _record_price(ml, "price", None)
        assert ml.explain("price").memory.created_at.ToSeconds() == pytest.approx(start)
        assert engine_clock() == start


def test_simulation_needs_the_embedded_store() -> None:
    with pytest.raises(ConfigError, match="simulation needs the embedded store"):
        Config(store="redis://127.0.0.1:6379/0", simulation=True).validated()
    Config(data_dir="/tmp/x", simulation=True).validated()

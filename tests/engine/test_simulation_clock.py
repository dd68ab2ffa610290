"""The engine's time in simulation mode: the clock only moves forward, with the
requests' times, and only a ManualClock can be moved."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.clock import ManualClock, system_clock
from memlineage.lineage.errors import ValidationError
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES

USER = Creator("user", "user:alice")


def _engine(simulation: bool) -> tuple[ManualClock, Engine]:
    clock = ManualClock(T0)
    store = EmbeddedStore(clock=clock)
    return clock, Engine(store, PolicyHolder(BUNDLED_POLICIES), clock=clock, simulation=simulation)


def test_a_simulation_needs_a_clock_it_can_move() -> None:
    with pytest.raises(TypeError, match="ManualClock"):
        Engine(EmbeddedStore(), PolicyHolder(BUNDLED_POLICIES), clock=system_clock, simulation=True)


def test_each_stated_time_moves_the_clock_forward_never_back() -> None:
    clock, engine = _engine(simulation=True)
    rec = MemoryRecord(id="m", namespace="default", creator_kind="user", creator_id="user:alice")
    out = engine.record(rec, time=T0 + 86400)
    assert out.memory is not None and out.memory.created_at == T0 + 86400
    assert clock() == T0 + 86400
    assert engine.check("default", "read", ["m"], USER).decided_at == T0 + 86400
    assert engine.check("default", "read", ["m"], USER, time=T0 + 86400).decided_at == T0 + 86400
    with pytest.raises(ValidationError) as caught:
        engine.check("default", "read", ["m"], USER, time=T0)
    assert caught.value.field == "time"
    assert "before the simulation clock (2026-01-02T00:00:00Z)" in caught.value.message
    with pytest.raises(ValidationError, match="is not a number"):
        engine.check("default", "read", ["m"], USER, time=math.nan)
    assert clock() == T0 + 86400


def test_without_simulation_the_limit_is_the_setting() -> None:
    clock, engine = _engine(simulation=False)
    engine.max_future_seconds = 60.0
    rec = MemoryRecord(id="m", namespace="default", creator_kind="user", creator_id="user:alice")
    engine.record(rec)
    assert engine.check("default", "read", ["m"], USER, time=T0 + 60).decided_at == T0 + 60
    with pytest.raises(ValidationError, match="more than 60 s ahead") as caught:
        engine.check("default", "read", ["m"], USER, time=T0 + 61)
    assert caught.value.field == "time" and clock() == T0


def test_manual_clock_advance_to() -> None:
    clock = ManualClock(10.0)
    assert clock.advance_to(10.0) == 10.0 and clock.advance_to(12.5) == 12.5
    with pytest.raises(ValueError, match="before the clock"):
        clock.advance_to(12.0)
    assert clock() == 12.5


def test_a_simulation_counts_each_read_before_the_next_request(tmp_path: Path) -> None:
    """A simulation-mode sidecar flushed access statistics on wall time, so a policy
    reading `access_count` answered by how fast the requests came (allow, allow,
    allow back to back; allow, degrade, degrade 1.5 s apart) while `memlineage
    simulate` answered allow, degrade, degrade (an outside audit)."""
    policies = tmp_path / "policies"
    shutil.copytree(BUNDLED_POLICIES, policies)
    (policies / "seen.mlp").write_text(
        "policy seen_before priority 20 {\n  on read\n  when memory.access_count >= 1\n"
        '  degrade annotate("read before") "read before"\n}\n'
    )
    clock = ManualClock(T0)
    engine = Engine(
        EmbeddedStore(clock=clock), PolicyHolder(str(policies)), clock=clock, simulation=True
    )
    engine.record(
        MemoryRecord(id="n", namespace="default", creator_kind="user", creator_id="user:alice")
    )
    effects = [
        engine.check("default", "read", ["n"], USER, time=T0 + 60 * k).decision.effect
        for k in (1, 2, 3)
    ]
    assert effects == ["allow", "degrade", "degrade"]

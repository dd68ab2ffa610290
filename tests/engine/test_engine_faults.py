"""A store that fails while a rule reads a rate counter: the engine applies its
fail mode (UNAVAILABLE when closed, the documented decision when degraded)
instead of treating it as a rule error."""

from __future__ import annotations

import pytest
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.errors import StoreUnavailableError
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES


class CountersDown(EmbeddedStore):
    """The real embedded store with one injected fault: counters are unreachable."""

    def count_until(self, *args, **kwargs):  # what rate rules read (``count`` too)
        raise StoreUnavailableError("counter shard unreachable")


def engine(fail_mode: str) -> Engine:
    store = CountersDown(clock=ManualClock(T0))
    store.record(
        MemoryRecord(
            id="price",
            namespace="default",
            creator_kind="tool",
            creator_id="tool:flight_api",
            tags=("flight_price",),
            created_at=T0 - 7200,
        )
    )
    return Engine(store, PolicyHolder(BUNDLED_POLICIES), clock=ManualClock(T0), fail_mode=fail_mode)


def test_fail_closed_raises_unavailable() -> None:
    with pytest.raises(StoreUnavailableError):
        engine("closed").check("default", "read", ["price"], Creator("user", "user:u"))
    with pytest.raises(StoreUnavailableError):
        engine("closed").filter_rank("default", [("price", 0.9)], Creator("user", "user:u"))


def test_fail_degraded_answers_the_documented_decision() -> None:
    d = engine("degraded").check("default", "read", ["price"], Creator("user", "user:u"))
    assert d.decision.effect == "degrade"
    assert d.decision.reasons[0].policy == "<store-unavailable>"
    ranked = engine("degraded").filter_rank("default", [("price", 0.9)], Creator("user", "user:u"))
    assert ranked[0].kept and ranked[0].decision.decision.reasons[0].policy == "<store-unavailable>"

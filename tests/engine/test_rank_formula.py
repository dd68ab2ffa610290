"""FilterRank ranks through the one rank formula (`scoring.formulas.rank_score`):
every candidate's rank is the formula of its similarity, its decision's compliance
score and down-rank factors, and its reliability and value."""

from __future__ import annotations

import math

from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.scoring.config import ScoringConfig
from memlineage.scoring.formulas import rank_score
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES

NS = "default"


def test_every_rank_is_the_formula_of_its_parts() -> None:
    clock = ManualClock(T0)
    cfg = ScoringConfig(rank_reliability_weight=0.6, rank_value_weight=0.3)
    engine = Engine(
        EmbeddedStore(clock=clock), PolicyHolder(BUNDLED_POLICIES), clock=clock, scoring=cfg
    )

    def record(mid: str, creator: str, **fields: object) -> None:
        rec = MemoryRecord(
            id=mid,
            namespace=NS,
            creator_kind=creator.split(":")[0],
            creator_id=creator,
            created_at=clock() - 60.0,
            **fields,
        )  # type: ignore[arg-type]
        assert engine.record(rec).recorded

    record("fact", "user:alice")
    record("guess", "reasoning:planner", creator_confidence=0.4)  # weak chain: downrank
    record("plan", "agent:planner", dependencies=("guess",))
    record("note", "agent:scout", creator_confidence=0.9, volatility="high")
    candidates = [("fact", 0.9), ("guess", 0.8), ("plan", 0.7), ("note", 0.6), ("nope", 0.5)]
    ranked = engine.filter_rank(NS, candidates, Creator("user", "user:alice"))
    factors = 0
    for c in ranked:
        d = c.decision.decision
        downrank = math.prod(
            float(o.args[0])
            for o in d.obligations  # type: ignore[arg-type]
            if o.kind == "downrank"
        )
        factors += downrank != 1.0
        assert c.rank_score == rank_score(
            cfg, c.similarity, d.compliance_score, c.reliability, c.value_score, downrank
        )
    assert factors  # a down-rank factor was part of the formula
    assert len({c.rank_score for c in ranked}) > 2

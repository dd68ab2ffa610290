"""A seeded run of the engine whose every answer is printed, one JSON line each:
`tests/test_native_build.py` runs it on the compiled modules and on a copy of the
plain sources and compares the two transcripts. Run as a script:
`python native_workload.py POLICY_DIR SEED STEPS`."""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from memlineage.engine.acts import ActArgument
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.engine.records import DecisionRecord
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.errors import LineageError
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator

T0 = 1_767_225_600.0
NS = "agent"
CREATORS = ["user:alice", "tool:web_search", "tool:flight_api", "agent:planner", "reasoning:r1"]
ACTIONS = ["send_email", "book_flight", "read_calendar", "transfer_money"]


def decision(rec: DecisionRecord) -> list[Any]:
    d = rec.decision
    return [
        d.effect,
        repr(d.compliance_score),
        repr(d.expected_cost),
        sorted(repr(r) for r in d.reasons),
        sorted(repr(o) for o in d.obligations),
        list(d.errors),
    ]


def run(policies: str, seed: int, steps: int, reuse: bool) -> list[Any]:
    rng = random.Random(seed)
    clock = ManualClock(T0)
    engine = Engine(
        EmbeddedStore(clock=clock), PolicyHolder(policies), clock=clock, reuse_decisions=reuse
    )
    ids: list[str] = []
    decided: list[str] = []
    out: list[Any] = []
    for step in range(steps):
        kind = rng.random()
        actor = Creator.parse(rng.choice(CREATORS))
        try:
            if kind < 0.3 or len(ids) < 5:
                creator = rng.choice(CREATORS)
                deps = tuple(rng.sample(ids, min(len(ids), rng.randint(0, 3))))
                claim = rng.random() < 0.3
                rec = MemoryRecord(
                    id=f"m{step}",
                    namespace=NS,
                    creator_id=creator,
                    dependencies=deps,
                    creator_confidence=round(rng.uniform(0.2, 1.0), 3),
                    type=rng.choice(["fact", "plan", "preference"]),
                    tags=tuple(rng.sample(["pii", "finance", "travel"], rng.randint(0, 2))),
                    subject="trip" if claim else None,
                    attribute=rng.choice(["price", "date"]) if claim else None,
                    value=str(rng.randint(1, 4)) if claim else None,
                )
                result = engine.record(rec, Creator.parse(creator))
                if result.recorded:
                    ids.append(rec.id)
                out.append(["record", result.recorded, decision(result.decision)])
            elif kind < 0.6:
                op = rng.choice(["read", "read", "update", "delete", "derive"])
                picked = rng.sample(ids, 1)
                rec2 = engine.check(NS, op, picked, actor)
                decided.append(rec2.decision_id)
                out.append(["check", op, picked, decision(rec2)])
            elif kind < 0.75:
                cands = [
                    (m, round(rng.uniform(0.1, 1.0), 3)) for m in rng.sample(ids, min(12, len(ids)))
                ]
                ranked = engine.filter_rank(NS, cands, actor, limit=rng.randint(0, 8))
                out.append(
                    [
                        "rank",
                        [
                            [
                                c.memory_id,
                                c.kept,
                                repr(c.rank_score),
                                repr(c.reliability),
                                repr(c.value_score),
                                decision(c.decision),
                            ]
                            for c in ranked
                        ],
                    ]
                )
            elif kind < 0.85:
                args = [ActArgument("to", tuple(rng.sample(ids, 1)), value="x@example.com")]
                rec3 = engine.act(NS, rng.choice(ACTIONS), rng.sample(ids, 2), args, actor)
                out.append(["act", decision(rec3)])
            elif kind < 0.92 and decided:
                n = engine.feedback(NS, rng.choice(decided), rng.sample(ids, 2), rng.random() < 0.6)
                out.append(["feedback", n])
            else:
                out.append(["advance", clock.advance(rng.choice([1.0, 60.0, 3600.0, 86400.0 * 3]))])
        except LineageError as exc:
            out.append(["refused", type(exc).__name__, str(exc)])
    return out


if __name__ == "__main__":
    policies, seed, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for reuse in (False, True):
        for line in run(policies, seed, steps, reuse):
            print(json.dumps(line))

"""What the engine answers: its result types and the decision that is the
sidecar's own rather than a policy's (store unavailable)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from memlineage_dsl.decision import DEGRADE, DENY, ERROR, Decision, ObligationOut, Reason

from memlineage.engine.records import DecisionRecord
from memlineage.lineage.grants import GrantRecord
from memlineage.lineage.model import MemoryRecord
from memlineage.lineage.proposals import Proposal
from memlineage.scoring.batch import Scores

UNAVAILABLE = "<store-unavailable>"
_DOWN_MESSAGE = "lineage store unavailable: provenance not verified"
_DOWN_READ = Decision(
    DEGRADE,
    0.5,
    0.0,
    obligations=(ObligationOut("annotate", (_DOWN_MESSAGE,), UNAVAILABLE),),
    reasons=(Reason(UNAVAILABLE, DEGRADE, _DOWN_MESSAGE, 0, ERROR),),
    errors=(_DOWN_MESSAGE,),
)
_DOWN_OTHER = Decision(
    DENY,
    0.0,
    0.0,
    reasons=(Reason(UNAVAILABLE, DENY, _DOWN_MESSAGE, 0, ERROR),),
    errors=(_DOWN_MESSAGE,),
)


def store_down(op: str) -> Decision:
    """The documented fail-degraded decision: reads degrade, the rest is denied."""
    return _DOWN_READ if op == "read" else _DOWN_OTHER


class RankedCandidate(NamedTuple):
    """One FilterRank candidate, request order; a named tuple for the same reason as
    `DecisionRecord` (one per candidate)."""

    memory_id: str
    similarity: float
    rank_score: float
    kept: bool
    decision: DecisionRecord
    reliability: float = 1.0
    value_score: float = 1.0


@dataclass(frozen=True, slots=True)
class RecordResult:
    recorded: bool
    decision: DecisionRecord
    memory: MemoryRecord | None = None
    superseded_id: str | None = None
    affected_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StatusResult:
    applied: bool
    decision: DecisionRecord
    memory: MemoryRecord | None = None
    affected_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Explanation:
    memory: MemoryRecord
    ancestors: tuple[MemoryRecord, ...]
    descendants: tuple[MemoryRecord, ...]
    edges: tuple[tuple[str, str], ...]
    decisions: tuple[DecisionRecord, ...]
    truncated: bool
    scores: Scores
    source_stats: dict[str, tuple[float, float]]
    grants: tuple[GrantRecord, ...] = ()  # naming the memory or matching its creator
    at: float = 0.0  # when it was explained (whether each grant is effective then)
    versions: tuple[MemoryRecord, ...] = ()  # earlier versions, newest first (revisions)
    proposal: Proposal | None = None  # a transition the sweep proposed to its owners
    objections_left: int = 0

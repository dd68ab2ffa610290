"""What a caller acts on in a decision: its effect, its obligations and its compliance
score, in the one form the shadow (a candidate beside the serving set) and `memlineage
replay` (a candidate against the log) both compare, so that what one counts as a
disagreement the other reports as a change (before, replay compared the effect and the
score only, and called "unchanged" a candidate that dropped a `downrank` or a
`require_confirmation` the shadow counted on every such decision). The form is the
decision log's: obligations as it writes them (`kind(args)`), the score to its places.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from memlineage_dsl.decision import Decision

__all__ = [
    "EFFECT",
    "OBLIGATIONS",
    "SCORE",
    "SCORE_PLACES",
    "Answer",
    "answer",
    "change",
    "logged",
]

SCORE_PLACES = 6  # the decision log's `score` (`DecisionLog._body`)
EFFECT, OBLIGATIONS, SCORE = "effect", "obligations", "score"


class Answer(NamedTuple):
    effect: str
    obligations: tuple[str, ...]  # each as the log writes it: `downrank(0.5)`
    score: float  # to SCORE_PLACES


def answer(d: Decision) -> Answer:
    """`d` as a caller acts on it."""
    return Answer(
        d.effect, tuple(str(o) for o in d.obligations), round(d.compliance_score, SCORE_PLACES)
    )


def logged(effect: str, obligations: Sequence[str], score: float) -> Answer:
    """A decision-log line's answer (its `effect`, `obligations`, `score`)."""
    return Answer(effect, tuple(obligations), round(score, SCORE_PLACES))


def change(before: Answer, after: Answer) -> str | None:
    """What differs, the first of: the effect, the obligations (under one effect), the
    score (under one effect with the same obligations); None when nothing does."""
    if before.effect != after.effect:
        return EFFECT
    if before.obligations != after.obligations:
        return OBLIGATIONS
    if before.score != after.score:
        return SCORE
    return None

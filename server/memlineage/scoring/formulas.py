"""The scores of one memory, written plainly: the reference the numpy path must match.

credibility(s) = (prior(s) * n0 + ok) / (n0 + ok + bad)
    a Beta-posterior mean: bounded in (0,1), and a source with a long record
    moves little on one wrong claim.
reliability(m) = 1 - (1 - r_c) * prod_k (1 - rho * c_k)            (consensus)
    r_c = r_d * prod_j (1 - kappa * c_j / (c_j + c_m))            (contradiction)
    r_d = confidence * c_m * 0.5 ** (age / half_life(volatility))   (decay)
    c_m the creator's credibility, c_j contradicting sources', c_k confirming ones'.
    Contradiction lowers smoothly and in proportion to the other source's
    weight; consensus only ever raises. A derived memory is capped by the
    least reliable memory it rests on: reliability = min(own, ancestors).
value(m) = alpha*accuracy + beta*relevance + gamma*utility - delta*cost, in [0,1]
    accuracy  = (uses_ok + 1) / (uses_ok + uses_failed + 2)
    relevance = min(1, exp(-lambda * idle) + boost * min(1, log1p(n)/log1p(N)))
    utility   = min(1, log1p(derivations + uses_ok) / log1p(U))
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from memlineage.scoring.config import ScoringConfig


def credibility(cfg: ScoringConfig, source: str, ok: float, bad: float) -> float:
    n0 = cfg.prior_strength
    return (cfg.prior(source) * n0 + ok) / (n0 + ok + bad)


def decay(cfg: ScoringConfig, volatility: str | None, age: float) -> float:
    half = cfg.half_life(volatility)
    if math.isinf(half) or age <= 0:
        return 1.0
    return 0.5 ** (age / half)


def reliability(
    cfg: ScoringConfig,
    *,
    confidence: float,
    creator_cred: float,
    age: float,
    volatility: str | None,
    contradicting: Sequence[float] = (),
    confirming: Sequence[float] = (),
) -> float:
    r = min(max(confidence, 0.0), 1.0) * creator_cred * decay(cfg, volatility, age)
    for c in contradicting:
        r *= 1.0 - cfg.contradiction_weight * c / (c + creator_cred)
    gap = 1.0 - r
    for c in confirming:
        gap *= 1.0 - cfg.consensus_weight * c
    return min(max(1.0 - gap, 0.0), 1.0)


def value(
    cfg: ScoringConfig,
    *,
    uses_ok: int,
    uses_failed: int,
    idle: float,
    access_count: int,
    derivations: int,
    memory_type: str,
) -> float:
    accuracy = (uses_ok + 1.0) / (uses_ok + uses_failed + 2.0)
    freq = min(1.0, math.log1p(access_count) / math.log1p(cfg.frequency_saturation))
    relevance = min(
        1.0, math.exp(-cfg.relevance_lambda * max(idle, 0.0)) + cfg.frequency_boost * freq
    )
    utility = min(1.0, math.log1p(derivations + uses_ok) / math.log1p(cfg.utility_saturation))
    v = (
        cfg.alpha * accuracy
        + cfg.beta * relevance
        + cfg.gamma * utility
        - cfg.delta * cfg.cost(memory_type)
    )
    return min(max(v, 0.0), 1.0)


def rank_score(
    cfg: ScoringConfig,
    similarity: float,
    compliance: float,
    reliability: float,
    value: float,
    downrank: float = 1.0,
) -> float:
    """A retrieval candidate's rank (FilterRank): similarity x compliance x the
    reliability and value terms x the product of its decision's down-rank factors.
    The one copy of the formula: the engine calls it for every candidate."""
    wr, wv = cfg.rank_reliability_weight, cfg.rank_value_weight
    return similarity * compliance * (1 - wr + wr * reliability) * (1 - wv + wv * value) * downrank

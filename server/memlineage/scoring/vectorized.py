"""The same scores as `formulas`, over numpy arrays: one pass for a whole batch
(a filter-and-rank call, a sweep batch). Ragged per-memory lists (who
contradicts, who confirms) come as (memory index, credibility) pairs and are
multiplied in with `bincount` over logarithms."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from memlineage.scoring.config import ScoringConfig

F = NDArray[np.float64]
I = NDArray[np.int64]  # noqa: E741 - index arrays


def credibility(cfg: ScoringConfig, prior: F, ok: F, bad: F) -> F:
    n0 = cfg.prior_strength
    return (prior * n0 + ok) / (n0 + ok + bad)


def _product_per_memory(n: int, idx: I, factors: F) -> F:
    if idx.size == 0:
        return np.ones(n)
    logs = np.log(np.clip(factors, 1e-300, None))
    return np.exp(np.bincount(idx, weights=logs, minlength=n))


def reliability(
    cfg: ScoringConfig,
    confidence: F,
    creator_cred: F,
    age: F,
    half_life: F,
    contra_idx: I,
    contra_cred: F,
    confirm_idx: I,
    confirm_cred: F,
) -> F:
    n = confidence.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        d = np.where(age > 0, 0.5 ** (np.maximum(age, 0.0) / half_life), 1.0)
    r = np.minimum(np.maximum(confidence, 0.0), 1.0) * creator_cred * d
    if contra_idx.size:
        own = creator_cred[contra_idx]
        r = r * _product_per_memory(
            n, contra_idx, 1.0 - cfg.contradiction_weight * contra_cred / (contra_cred + own)
        )
    gap = (1.0 - r) * _product_per_memory(n, confirm_idx, 1.0 - cfg.consensus_weight * confirm_cred)
    return np.minimum(np.maximum(1.0 - gap, 0.0), 1.0)


def value(
    cfg: ScoringConfig,
    uses_ok: F,
    uses_failed: F,
    idle: F,
    access_count: F,
    derivations: F,
    cost: F,
) -> F:
    # Scalars with `math`, clamps with minimum/maximum (np.clip's dispatch costs more
    # than the arithmetic on a batch of a few dozen): the same floats.
    accuracy = (uses_ok + 1.0) / (uses_ok + uses_failed + 2.0)
    freq = np.minimum(1.0, np.log1p(access_count) / math.log1p(cfg.frequency_saturation))
    relevance = np.minimum(
        1.0, np.exp(-cfg.relevance_lambda * np.maximum(idle, 0.0)) + cfg.frequency_boost * freq
    )
    utility = np.minimum(1.0, np.log1p(derivations + uses_ok) / math.log1p(cfg.utility_saturation))
    v = cfg.alpha * accuracy + cfg.beta * relevance + cfg.gamma * utility - cfg.delta * cost
    return np.minimum(np.maximum(v, 0.0), 1.0)

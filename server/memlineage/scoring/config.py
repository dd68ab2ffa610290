"""Scoring weights, half-lives and thresholds: configuration, not code."""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from functools import cached_property

from memlineage_dsl.matchers import glob_spelling, source_spelling

DAY = 86400.0

DEFAULT_HALF_LIVES: dict[str, float] = {
    "high": 600.0,  # a CPU reading: half its reliability in 10 minutes
    "medium": DAY,  # a price, a schedule
    "low": math.inf,  # a goal, a preference: no decay
    "static": math.inf,
}
DEFAULT_PRIORS: tuple[tuple[str, float], ...] = (
    ("user:*", 0.9),
    ("system:*", 0.9),
    ("tool:*", 0.8),
    ("agent:*", 0.7),
    ("reasoning:*", 0.6),
    ("*", 0.5),
)


@dataclass(frozen=True)
class ScoringConfig:
    # -- reliability
    half_lives: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_HALF_LIVES))
    default_volatility: str = "low"  # memories recorded without a class do not decay
    credibility_priors: tuple[tuple[str, float], ...] = DEFAULT_PRIORS
    prior_strength: float = 10.0  # pseudo-observations behind a prior: one bad claim moves little
    contradiction_weight: float = 0.5  # kappa: an equally credible contradiction costs 25%
    consensus_weight: float = 0.5  # rho: each confirming source closes this share of the gap
    # -- value  V = alpha*accuracy + beta*relevance + gamma*utility - delta*cost
    alpha: float = 0.4
    beta: float = 0.4
    gamma: float = 0.2
    delta: float = 0.1
    relevance_half_life: float = 7 * DAY  # lambda = ln 2 / this
    frequency_boost: float = 0.2  # added to relevance at saturation
    frequency_saturation: float = 50.0  # accesses that give the full boost
    utility_saturation: float = 20.0  # derivations + successful uses for utility 1
    type_costs: dict[str, float] = field(default_factory=dict)
    default_cost: float = 0.1
    # -- lifecycle
    archive_below: float = 0.3
    evict_below: float = 0.25  # an idle memory with no feedback settles near 0.19
    evict_after_archived: float = 30 * DAY
    hot_window: float = DAY  # accessed within: reviewed every hot_interval
    hot_interval: float = 3600.0
    cold_interval: float = 7 * DAY
    near_margin: float = 0.05  # within this of a threshold: reviewed every near_interval
    near_interval: float = 600.0
    # -- the agent's voice: the sweep proposes before it moves an agent-owned memory
    objection_window: float = 0.0  # seconds its owners have to object; 0: no proposals
    objection_postpone: float = DAY  # how long one objection postpones the transition
    max_objections: int = 3  # objections a memory may get while its value stays low
    # -- ranking: similarity x compliance x (1-w_r + w_r*reliability) x (1-w_v + w_v*value)
    rank_reliability_weight: float = 0.5
    rank_value_weight: float = 0.25

    def check(self) -> None:
        """ValueError naming the first setting out of its range: a weight outside [0, 1]
        or a prior above 1 bends every score without an error anywhere else."""
        unit = {
            "alpha": self.alpha,
            "beta": self.beta,
            "gamma": self.gamma,
            "delta": self.delta,
            "contradiction_weight": self.contradiction_weight,
            "consensus_weight": self.consensus_weight,
            "frequency_boost": self.frequency_boost,
            "archive_below": self.archive_below,
            "evict_below": self.evict_below,
            "near_margin": self.near_margin,
            "rank_reliability_weight": self.rank_reliability_weight,
            "rank_value_weight": self.rank_value_weight,
            **{f"credibility_priors.{p}": v for p, v in self.credibility_priors},
        }
        for name, v in unit.items():
            if not 0.0 <= v <= 1.0:  # NaN fails too
                raise ValueError(f"{name} must be in [0, 1], got {v!r}")
        costs = {"default_cost": self.default_cost}
        costs.update({f"type_costs.{k}": v for k, v in self.type_costs.items()})
        for name, v in costs.items():
            if not 0.0 <= v < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        positive = {
            "prior_strength": self.prior_strength,
            "relevance_half_life": self.relevance_half_life,
            "frequency_saturation": self.frequency_saturation,
            "utility_saturation": self.utility_saturation,
            "hot_interval": self.hot_interval,
            "cold_interval": self.cold_interval,
            "near_interval": self.near_interval,
            **{f"half_lives.{k}": v for k, v in self.half_lives.items()},
        }
        for name, v in positive.items():
            if not v > 0.0:
                raise ValueError(f"{name} must be > 0, got {v!r}")
        if self.default_volatility not in self.half_lives:
            raise ValueError(
                f"default_volatility {self.default_volatility!r} is not one of the classes "
                f"in half_lives ({', '.join(sorted(self.half_lives))})"
            )

    @cached_property
    def min_half_life(self) -> float:
        """The fastest reliability decay of any class (inf: none decays)."""
        return min(self.half_lives.values(), default=math.inf)

    @cached_property
    def relevance_lambda(self) -> float:
        return math.log(2) / self.relevance_half_life

    def half_life(self, volatility: str | None) -> float:
        cache: dict[str | None, float] = self.__dict__.setdefault("_half_life_cache", {})
        hit = cache.get(volatility)
        if hit is None:
            default = self.half_lives.get(self.default_volatility, math.inf)
            hit = self.half_lives.get(volatility or self.default_volatility, default)
            if len(cache) < 10_000:
                cache[volatility] = hit
        return hit

    def prior(self, source: str) -> float:
        """The first matching pattern's prior (0.5 without one). Ids and patterns compare
        as a policy's source lists compare them (`source_spelling`: case-folded, no
        separators), so `tool:Web-Search` takes `tool:web_*`'s prior, not `tool:*`'s."""
        cache: dict[str, float] = self.__dict__.setdefault("_prior_cache", {})
        hit = cache.get(source)
        if hit is None:
            spelled = self.__dict__.get("_spelled_priors")
            if spelled is None:
                spelled = self.__dict__["_spelled_priors"] = tuple(
                    (glob_spelling(p), v) for p, v in self.credibility_priors
                )
            name = source_spelling(source)
            hit = next((v for p, v in spelled if fnmatch.fnmatchcase(name, p)), 0.5)
            if len(cache) < 100_000:
                cache[source] = hit
        return hit

    def cost(self, memory_type: str) -> float:
        return self.type_costs.get(memory_type, self.default_cost)

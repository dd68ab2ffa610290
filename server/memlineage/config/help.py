"""The help of the `[scoring]` keys (the scoring room holds no configuration
plumbing) and the sections settings are grouped in, in docs and `serve --help`."""

from __future__ import annotations

# `[scoring]`: ScoringConfig's fields are its keys (name, type, default); their help
# and section are here, because the scoring room holds no configuration plumbing.
# A field without an entry (or an entry without a field) fails at import.
_SCORING_HELP: dict[str, tuple[str, str]] = {
    "half_lives": (
        "seconds for a memory's reliability to halve, per volatility class (`inf`: no decay); "
        "the table replaces the default one",
        "scoring-reliability",
    ),
    "default_volatility": (
        "the volatility class of a memory recorded without one",
        "scoring-reliability",
    ),
    "credibility_priors": (
        "a source's prior credibility: [fnmatch pattern of `kind:id`, credibility] pairs, the "
        "first match wins (no match: 0.5)",
        "scoring-reliability",
    ),
    "prior_strength": (
        "pseudo-observations behind a prior: one bad claim moves a source's credibility little",
        "scoring-reliability",
    ),
    "contradiction_weight": (
        "kappa: what a contradicting claim costs (0.5: an equally credible one costs 25%)",
        "scoring-reliability",
    ),
    "consensus_weight": (
        "rho: the share of the gap to 1 each confirming source closes",
        "scoring-reliability",
    ),
    "alpha": ("weight of accuracy (reliability) in the value", "scoring-value"),
    "beta": ("weight of relevance in the value", "scoring-value"),
    "gamma": ("weight of utility in the value", "scoring-value"),
    "delta": ("weight of cost in the value (subtracted)", "scoring-value"),
    "relevance_half_life": (
        "seconds since the last access for relevance to halve",
        "scoring-value",
    ),
    "frequency_boost": ("added to relevance at frequency_saturation accesses", "scoring-value"),
    "frequency_saturation": ("accesses that give the full frequency_boost", "scoring-value"),
    "utility_saturation": ("derivations plus successful uses that give utility 1", "scoring-value"),
    "type_costs": ("cost per memory type (`type = cost`)", "scoring-value"),
    "default_cost": ("cost of a memory type not in type_costs", "scoring-value"),
    "archive_below": (
        "the sweep archives an active or pending memory whose value is below this",
        "scoring-lifecycle",
    ),
    "evict_below": (
        "the sweep evicts an archived memory whose value is below this (an idle memory with "
        "no feedback settles near 0.19)",
        "scoring-lifecycle",
    ),
    "evict_after_archived": (
        "seconds a memory stays archived before it may be evicted",
        "scoring-lifecycle",
    ),
    "hot_window": (
        "a memory accessed within this many seconds is reviewed every hot_interval",
        "scoring-lifecycle",
    ),
    "hot_interval": ("seconds between reviews of a hot memory", "scoring-lifecycle"),
    "cold_interval": ("seconds between reviews of any other memory", "scoring-lifecycle"),
    "near_margin": (
        "a value within this of a threshold is reviewed every near_interval",
        "scoring-lifecycle",
    ),
    "near_interval": ("seconds between reviews of a memory near a threshold", "scoring-lifecycle"),
    "objection_window": (
        "seconds the owners of an agent-owned memory have to object (Object RPC) before the "
        "sweep archives or evicts it; they hear a `proposed` event on Watch; 0: no proposals",
        "scoring-lifecycle",
    ),
    "objection_postpone": (
        "seconds one objection postpones the transition (then it is proposed again)",
        "scoring-lifecycle",
    ),
    "max_objections": (
        "objections a memory may get while its value stays low; past them the next "
        "proposal is final",
        "scoring-lifecycle",
    ),
    "rank_reliability_weight": (
        "w_r: FilterRank multiplies by (1 - w_r + w_r * reliability)",
        "scoring-ranking",
    ),
    "rank_value_weight": (
        "w_v: FilterRank multiplies by (1 - w_v + w_v * value)",
        "scoring-ranking",
    ),
}

# Sections, in the order docs and `serve --help` list them: (id, title, introduction).
SECTIONS: tuple[tuple[str, str, str], ...] = (
    ("serving", "Serving", "The gRPC server: address, threads, shutdown, TLS."),
    ("auth", "Authentication", "Who may call, in which namespaces."),
    ("store", "Store", "Where lineage lives and how the store is reached."),
    ("policies", "Policies and decisions", "What decides, and how."),
    ("decisions", "Decision log and retention", "What is kept of each decision."),
    ("access", "Access statistics", "How reads are counted."),
    ("metrics", "Metrics", "Prometheus."),
    ("tracing", "Tracing", "OpenTelemetry spans of the RPCs; off unless set (docs/operating.md)."),
    ("lifecycle", "Governance sweep", "The background pass that archives and evicts by value."),
    (
        "time",
        "Time and simulation",
        "What time a request may state, and a clock the callers advance.",
    ),
    (
        "scoring-reliability",
        "Reliability and credibility",
        "How much a memory is believed, from its age and its sources.",
    ),
    (
        "scoring-value",
        "Value",
        "A memory's value, `alpha*accuracy + beta*relevance + gamma*utility - delta*cost`.",
    ),
    (
        "scoring-lifecycle",
        "Lifecycle thresholds and review schedule",
        "When the sweep archives, evicts and looks again.",
    ),
    (
        "scoring-ranking",
        "Ranking",
        "FilterRank's score: similarity x compliance x the two factors below.",
    ),
)

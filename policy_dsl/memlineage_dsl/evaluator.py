"""Evaluate a compiled policy set on one request: pure, total, never raises.

Semantics (docs/language.md, "Decisions"):
- a policy applies when its `on` lists the operation; a rule that reads the
  lineage of a memory with unknown provenance does not apply to it;
- a rule that fails at run time (bad type, empty `min`, NaN score…) is
  reported in `Decision.errors` and counts as a DENY with score 0 (fail closed);
- resolution: deny_overrides (any deny wins, else any degrade), priority (only
  the highest-priority fired rules count; the rest are `overridden`), or
  cost_aware (deny still wins; degrades are honoured in priority order while
  their cost fits `request.budget`; the others are `waived`: obligations
  dropped, score multiplied by 1 - waive_penalty);
- compliance = sum(w_i * s_i) / sum(w_i) over applicable rules, s_i = 1 for a
  rule that did not fire, else its score (defaults allow 1, degrade 0.5,
  deny 0); a DENY caps it at the lowest deny score; no rule -> 1.0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from .codegen import rt_uncovered
from .compiler import CompiledPolicy, CompiledPolicySet, OpPlan
from .decision import (
    ALLOW,
    DEGRADE,
    DENY,
    ERROR,
    FIRED,
    OVERRIDDEN,
    WAIVED,
    Decision,
    ObligationOut,
    Reason,
    stricter,
)
from .facts import (
    Creator,
    LineageSnapshot,
    Memory,
    MemoryFacts,
    Request,
    UnknownProvenance,
    snap_timed,
)
from .limits import MAX_COST

_T = TypeVar("_T")
Failed = Sequence[tuple[int, Exception]]  # (policy index, what its condition raised)

# Distinct fired-rule sets remembered per operation (decisions are frozen, so shared).
_CACHE_LIMIT = 4096


@dataclass(slots=True)
class _Outcome:
    policy: CompiledPolicy
    effect: str
    score: float
    cost: float
    obligations: tuple[ObligationOut, ...]
    status: str
    message: str


def decide(ps: CompiledPolicySet, req: Request, snap: LineageSnapshot) -> Decision:
    """The decision for `req`. Never raises: engine faults become a fail-closed DENY."""
    plan = ps.plans.get(req.op)
    if plan is None:
        msg = f"unknown operation `{req.op}`"
        return Decision(
            DENY, 0.0, 0.0, reasons=(Reason("<engine>", DENY, msg, 0, ERROR),), errors=(msg,)
        )
    try:
        if req.op == "act":
            return _decide_act(ps, plan, req, snap)
        m = req.memory  # `_decide_one`, written out: the call per decision is its cost
        t = req.target if req.target is not None else m
        # a snapshot that takes no notes of time comparisons: the plain ones
        test = plan.test if plan.test_fixed is None or snap_timed(snap) else plan.test_fixed
        fired, bad = test(m, t, req, snap, req.time)
        if not fired and not bad:
            return plan.allow_all
        return _fired_decision(ps, plan, fired, bad, m, t, req, snap)
    except Exception as exc:  # defensive: the engine itself must stay total
        msg = f"engine error: {type(exc).__name__}: {exc}"
        return Decision(
            DENY, 0.0, 0.0, reasons=(Reason("<engine>", DENY, msg, 0, ERROR),), errors=(msg,)
        )


def _decide_one(
    ps: CompiledPolicySet, plan: OpPlan, m: Memory, t: Memory, r: Request, s: LineageSnapshot
) -> Decision:
    fired, bad = plan.test(m, t, r, s, r.time)
    return _fired_decision(ps, plan, fired, bad, m, t, r, s)


def _fired_decision(
    ps: CompiledPolicySet,
    plan: OpPlan,
    fired: list[int],
    bad: list[tuple[int, Exception]] | None,
    m: Memory,
    t: Memory,
    r: Request,
    s: LineageSnapshot,
) -> Decision:
    """The decision once the rules that `fired` (and those that raised: `bad`) are known."""
    if not bad:
        if not fired:
            return plan.allow_all
        key: tuple[object, ...] = (
            (*fired, r.budget) if ps.strategy == "cost_aware" else tuple(fired)
        )
        hit = plan.cache.get(key)
        if hit is not None:  # only the static branch below keeps decisions under this key
            return hit
        static = plan.static
        if all(static[k] for k in fired):
            hit = _resolve(ps, plan, fired, (), m, t, r, s)
            if len(plan.cache) < _CACHE_LIMIT:
                plan.cache[key] = hit
            return hit
        # Rules with a computed score, cost or obligation argument: the decision is
        # a function of which rules fired and of those computed values.
        values = _dynamic_values(plan, fired, m, t, r, s)
        if values is not None:
            key = (
                "dynamic",
                tuple(fired),
                values,
                r.budget if ps.strategy == "cost_aware" else None,
            )
            hit = plan.cache.get(key)
            if hit is None:
                hit = _resolve(ps, plan, fired, (), m, t, r, s)
                if len(plan.cache) < _CACHE_LIMIT:
                    plan.cache[key] = hit
            return hit
    return _resolve(ps, plan, fired, bad or (), m, t, r, s)


_CACHEABLE = (str, int, float, bool, type(None))


def _dynamic_values(
    plan: OpPlan, fired: list[int], m: Memory, t: Memory, r: Request, s: LineageSnapshot
) -> tuple[object, ...] | None:
    """The computed parts of the fired non-static rules, each with its type, in plan
    order; None when one fails or is not a plain value (left to `_resolve`)."""
    now = r.time
    static = plan.static
    out: list[object] = []
    try:
        for k in fired:
            if static[k]:
                continue
            p = plan.policies[k]
            parts: list[object] = [p.score, p.cost]
            if p.message_fn is not None:
                parts.append(p.message_fn)
            for o in p.obligations:
                if o.dynamic:
                    parts.extend(o.args)
            for part in parts:
                if callable(part):
                    v = part(m, t, r, s, now)
                    if type(v) not in _CACHEABLE or v != v:  # NaN never equals a key
                        return None
                    out.append(type(v))
                    out.append(v)
                    if v == 0 and type(v) is float:  # 0.0 == -0.0: keep the sign apart
                        out.append(math.copysign(1.0, v))
    except Exception:
        return None
    return tuple(out)


def _decide_act(ps: CompiledPolicySet, plan: OpPlan, r: Request, s: LineageSnapshot) -> Decision:
    """An action is decided on every memory it relies on; the strictest wins. A denial
    by a rule that reads the arguments says which argument, origin and grant."""
    memories = r.memories or (r.memory,)
    if len(memories) > 1 and plan.test_request is not None and plan.test_memory is not None:
        # the rules that read no memory (the argument rules) are tested once
        fired_r, bad_r = plan.test_request(r.memory, r.memory, r, s, r.time)
        parts = []
        for m in memories:
            fired_m, bad_m = plan.test_memory(m, m, r, s, r.time)
            fired = sorted(fired_r + fired_m) if fired_r else fired_m
            bad = sorted((bad_r or []) + (bad_m or []), key=_first) if bad_r or bad_m else None
            parts.append(_fired_decision(ps, plan, fired, bad, m, m, r, s))
    else:
        parts = [_decide_one(ps, plan, m, m, r, s) for m in memories]
    first = parts[0]
    if len(parts) == 1 or (
        not first.expected_cost and all(part is first for part in parts)
    ):  # one decision for every memory (a cached one): merging it with itself is itself
        d = first
    else:
        effect = ALLOW
        for part in parts:
            effect = stricter(effect, part.effect)
        d = Decision(
            effect,
            min(part.compliance_score for part in parts),
            sum(part.expected_cost for part in parts),
            _dedupe_obligations(o for part in parts for o in part.obligations),
            _dedupe(x for part in parts for x in part.reasons),
            tuple(dict.fromkeys(e for part in parts for e in part.errors)),
        )
    if d.effect != DENY or not r.args:
        return d
    readers = plan.arg_readers
    if not any(x.policy in readers and x.effect == DENY and x.status == FIRED for x in d.reasons):
        return d
    found = argument_findings(r, s)
    if not found:
        return d
    detail = " (" + "; ".join(found) + ")"
    reasons = tuple(
        Reason(x.policy, x.effect, x.message + detail, x.priority, x.status)
        if x.policy in readers and x.effect == DENY and x.status == FIRED
        else x
        for x in d.reasons
    )
    return Decision(d.effect, d.compliance_score, d.expected_cost, d.obligations, reasons, d.errors)


def argument_findings(r: Request, s: LineageSnapshot) -> list[str]:
    """For each argument not covered: where it came from and which grant is missing."""
    out = []
    for a in r.args:
        if not a.sources:
            out.append(f"argument `{a.name}` has no source: the agent chose it")
            continue
        missing = rt_uncovered(s, r, a, r.time)
        if not missing:
            continue
        origins = ", ".join(
            f"{o.creator.id} via memory `{o.id}`"
            if isinstance(o, MemoryFacts)
            else f"memory `{o.id}` with no recorded lineage"
            for o in missing
        )
        out.append(
            f"argument `{a.name}` comes from {origins}: no live user grant lets it fill "
            f"`{a.name}` of `{r.action}`"
        )
    return out


def _first(pair: tuple[int, Exception]) -> int:
    return pair[0]


def _dedupe(items: Iterable[_T]) -> tuple[_T, ...]:
    return tuple(dict.fromkeys(items))


def _dedupe_obligations(items: Iterable[ObligationOut]) -> tuple[ObligationOut, ...]:
    """The same obligation from two rules is honoured once (the first rule names it)."""
    seen: dict[tuple[str, tuple[object, ...]], ObligationOut] = {}
    for o in items:
        seen.setdefault((o.kind, o.args), o)
    return tuple(seen.values())


def _number(value: object, what: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise TypeError(f"{what} must be a number, got {value!r}")
    return min(max(float(value), low), high)


def _arg(value: object) -> object:
    """A computed obligation argument: a number must be finite (it goes on the wire);
    a creator stands for its id (`refresh(memory.creator)`)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"obligation argument is {value!r}")
    if isinstance(value, Creator):
        return value.id
    return value


def _factor(kind: str, args: tuple[object, ...]) -> tuple[object, ...]:
    """A computed `downrank` factor held to [0, 1], as computed scores are: above 1 it
    would raise a degraded memory over allowed ones (an outside audit: a factor of
    1.8 ranked it first), below 0 turn its rank negative. A literal outside (0, 1] is
    lint's E203."""
    if kind != "downrank" or not args:
        return args
    x = args[0]
    if isinstance(x, bool) or not isinstance(x, int | float):
        return args
    return (min(max(float(x), 0.0), 1.0), *args[1:])


def _outcome(p: CompiledPolicy, m: Memory, t: Memory, r: Request, s: LineageSnapshot) -> _Outcome:
    now = r.time
    score = p.score(m, t, r, s, now) if callable(p.score) else p.score
    cost = p.cost(m, t, r, s, now) if callable(p.cost) else p.cost
    obligations = tuple(
        ObligationOut(
            o.kind,
            _factor(o.kind, tuple(_arg(a(m, t, r, s, now)) if callable(a) else a for a in o.args))
            if o.dynamic
            else o.args,
            p.name,
        )
        for o in p.obligations
    )
    message = p.message if p.message_fn is None else _computed_message(p.message_fn, m, t, r, s)
    return _Outcome(
        p,
        p.effect,
        _number(score, "score", 0.0, 1.0),
        _number(cost, "cost", 0.0, MAX_COST),
        obligations,
        FIRED,
        message or f"{p.effect} by policy `{p.name}`",
    )


def _computed_message(
    fn: Callable[..., object], m: Memory, t: Memory, r: Request, s: LineageSnapshot
) -> str:
    """A message with values. Its rule has fired: a message that reads the lineage of
    a memory without one is a run-time error (fail closed), not a rule that does not
    apply, which would let a deny go by for its message."""
    try:
        message = fn(m, t, r, s, r.time)
    except UnknownProvenance as exc:
        raise LookupError(f"message: {exc}") from None
    if not isinstance(message, str):  # the generated code joins strings: never taken
        raise TypeError(f"message must be a string, got {message!r}")
    return message


def _failed(p: CompiledPolicy, exc: BaseException) -> _Outcome:
    msg = f"policy `{p.name}` failed at run time ({type(exc).__name__}: {exc}); fail-closed deny"
    return _Outcome(p, DENY, 0.0, 0.0, (), ERROR, msg)


def _resolve(
    ps: CompiledPolicySet,
    plan: OpPlan,
    fired: list[int],
    bad: Failed,
    m: Memory,
    t: Memory,
    r: Request,
    s: LineageSnapshot,
) -> Decision:
    skipped: set[int] = set()
    by_index: dict[int, _Outcome] = {}
    # A rule that reads the lineage of a memory with none does not apply to that
    # memory; a rule over an act's arguments is about the act, not one memory: an
    # origin it cannot read fails it closed (skipping it would let the order of an
    # argument's sources, which the agent chooses, turn a deny into an allow).
    readers = plan.arg_readers
    for k, exc in bad:
        if isinstance(exc, UnknownProvenance) and plan.policies[k].name not in readers:
            skipped.add(k)
        else:
            by_index[k] = _failed(plan.policies[k], exc)
    for k in fired:
        p = plan.policies[k]
        try:
            by_index[k] = _outcome(p, m, t, r, s)
        except UnknownProvenance as exc:
            if p.name in readers:
                by_index[k] = _failed(p, exc)
            else:
                skipped.add(k)
        except Exception as exc:
            by_index[k] = _failed(p, exc)
    outcomes = [by_index[k] for k in sorted(by_index)]  # plan order: priority desc
    # a rule that failed at run time is reported, even where `resolve priority` lets a
    # higher one override it (else a rule broken for every request stays invisible)
    errors = tuple(o.message for o in outcomes if o.status == ERROR)

    if ps.strategy == "priority" and outcomes:
        top = outcomes[0].policy.priority
        for o in outcomes:
            if o.policy.priority < top:
                o.status = OVERRIDDEN
    elif ps.strategy == "cost_aware":
        _apply_budget(outcomes, r.budget, ps.waive_penalty)

    active = [o for o in outcomes if o.status != OVERRIDDEN]
    effect = ALLOW
    for o in active:
        effect = stricter(effect, o.effect)

    compliance = _compliance(plan, by_index, skipped, effect)
    if effect == DENY:
        obligations = _dedupe_obligations(
            ob for o in active if o.effect == DENY for ob in o.obligations
        )
    else:
        obligations = _dedupe_obligations(
            ob for o in active if o.status == FIRED for ob in o.obligations
        )
    cost = sum(o.cost for o in active if o.status == FIRED and o.effect != DENY)
    reasons = tuple(
        Reason(o.policy.name, o.effect, o.message, o.policy.priority, o.status) for o in outcomes
    )
    return Decision(
        effect, compliance, 0.0 if effect == DENY else cost, obligations, reasons, errors
    )


def _apply_budget(outcomes: list[_Outcome], budget: float, penalty: float) -> None:
    remaining = budget
    for o in outcomes:
        if o.effect != DEGRADE or o.status != FIRED or o.cost <= 0.0:
            continue
        if o.cost <= remaining + 1e-12:
            remaining -= o.cost
        else:
            o.status = WAIVED
            o.message = (
                f"{o.message} (waived: cost {o.cost:g} exceeds remaining budget {remaining:g})"
            )
            o.obligations = ()
            o.score *= 1.0 - penalty


def _compliance(
    plan: OpPlan, by_index: dict[int, _Outcome], skipped: set[int], effect: str
) -> float:
    total_w = 0.0
    total = 0.0
    deny_cap = 1.0
    for k, p in enumerate(plan.policies):
        if k in skipped:
            continue
        o = by_index.get(k)
        if o is not None and o.status == OVERRIDDEN:
            continue
        w = p.weight
        total_w += w
        total += w * (o.score if o is not None else 1.0)
        if o is not None and o.effect == DENY:
            deny_cap = min(deny_cap, o.score)
    score = total / total_w if total_w > 0 else 1.0
    if effect == DENY:
        score = min(score, deny_cap)
    return min(max(score, 0.0), 1.0)

"""Checked policy set -> `CompiledPolicySet`, indexed by operation.

For each operation one Python function is generated that tests the `when` of
every policy on that operation, each guarded on its own, and returns which
fired; score, cost and obligation arguments are folded to constants when they
read nothing from the request. Compile once, evaluate many times.
"""

from __future__ import annotations

import ast as pyast
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from . import ast as A
from .codegen import CodeGen
from .decision import ALLOW, DEGRADE, DENY, Decision
from .env import Env
from .facts import LineageSnapshot, Memory, Request, action_listed
from .messages import message_exprs, policy_typer, show_helper
from .schema import OPERATIONS

DEFAULT_SCORE = {ALLOW: 1.0, DEGRADE: 0.5, DENY: 0.0}
DEFAULT_WAIVE_PENALTY = 0.5

Value = Callable[..., object]  # f(m, t, r, s, now)
# The generated test of one operation: (m, t, r, s, now) -> (indexes of the policies
# that fired, [(index, exception)] of those whose condition raised, or None).
Test = Callable[
    [Memory, Memory, Request, LineageSnapshot, float],
    tuple[list[int], list[tuple[int, Exception]] | None],
]


@dataclass(frozen=True, slots=True)
class CompiledObligation:
    kind: str
    args: tuple[Value | object, ...]  # constants, or callables when dynamic
    dynamic: bool


@dataclass(frozen=True, slots=True)
class CompiledPolicy:
    index: int  # declaration order across the set
    name: str
    path: str
    line: int
    ops: frozenset[str]
    priority: int
    weight: float
    effect: str
    message: str
    obligations: tuple[CompiledObligation, ...]
    score: float | Value
    cost: float | Value
    when_source: str  # the generated Python, for `explain` and debugging
    functions: frozenset[str]  # built-ins it calls (age, ancestors, calls, …)
    attributes: frozenset[str]  # attribute names it reads (reliability, tags, …)
    # Every way its outcome depends on time is reported to the snapshot (`horizon`):
    # a decision it took in part stays valid until the snapshot's horizon.
    time_exact: bool = True
    # A message with values computed per decision (`message` is then unused).
    message_fn: Value | None = None
    # `when_source` with its comparisons of moving values written plainly (no `_tc`):
    # what `OpPlan.test_fixed` tests; None when it is `when_source` itself.
    when_fixed: str | None = None

    @property
    def static(self) -> bool:
        """Score, cost, obligations and message read nothing from the request."""
        return not (
            callable(self.score)
            or callable(self.cost)
            or any(o.dynamic for o in self.obligations)
            or self.message_fn is not None
        )


@dataclass(frozen=True, slots=True)
class OpPlan:
    """The policies of one operation and the generated function that tests them."""

    policies: tuple[CompiledPolicy, ...]
    test: Test
    allow_all: Decision  # returned as-is when no policy fires
    static: tuple[bool, ...]  # per policy: its outcome depends only on having fired
    uses: frozenset[str]  # functions its policies call: tells a server what lineage to load
    reads: frozenset[str]  # attributes its policies read: tells a server what to compute
    # Decisions for a set of fired static rules (and budget): frozen, so shared.
    cache: dict[tuple[object, ...], Decision] = field(default_factory=dict)
    # Every policy time-exact: a decision may be reused until its snapshot's horizon.
    reusable: bool = True
    # `act` only: an action relying on several memories is decided on each, but the
    # rules whose condition reads neither `memory` nor `target` (the argument rules)
    # come out the same for all of them: `test_request` tests those once, and
    # `test_memory` the others for each memory (None: one `test` of every rule).
    test_request: Test | None = None
    test_memory: Test | None = None
    # `act` only: the policies whose condition reads the arguments (a denial by one
    # says which argument, origin and grant).
    arg_readers: frozenset[str] = frozenset()
    # `test` with each comparison of a value that moves with time written plainly
    # instead of through `_tc`, which tells the snapshot when the outcome will change:
    # for a snapshot that takes no such notes (`timed` false, a decision that will
    # not be kept), the same outcomes for less work. None: `test` has no such
    # comparison.
    test_fixed: Test | None = None


@dataclass(frozen=True)
class CompiledPolicySet:
    strategy: str
    waive_penalty: float
    policies: tuple[CompiledPolicy, ...]
    plans: dict[str, OpPlan]
    # What `acts()` counts by, in the set: a server counts each allowed action under
    # every pattern here that it matches (`counts_action`).
    act_patterns: tuple[str | tuple[str, ...], ...] = ()

    def counts_action(self, action: str) -> list[str | tuple[str, ...]]:
        """The patterns of `acts()` in this set that `action` matches, as a policy's
        `in` matches an action list (`facts.action_listed`: every spelling; before,
        `SendMoney` was not counted under `send_*`, and a rate rule missed it)."""
        return [
            p for p in self.act_patterns if action_listed(action, (p,) if isinstance(p, str) else p)
        ]

    def policy(self, name: str) -> CompiledPolicy | None:
        return next((p for p in self.policies if p.name == name), None)


def _const_number(gen: CodeGen, e: A.Expr | None, default: float) -> float:
    if e is None:
        return default
    value = gen.function(e, "_const")(None, None, None, None, 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("expected a number")
    return float(value)


def _value(gen: CodeGen, e: A.Expr, name: str) -> object:
    """A constant when `e` reads nothing from the request, else a compiled function."""
    fn = gen.function(e, name)
    if gen.is_static(e):
        try:
            return fn(None, None, None, None, 0.0)
        except Exception:  # e.g. 0 / 0: left to fail closed at run time, with its error
            return fn
    return fn


def _number_value(gen: CodeGen, e: A.Expr, name: str) -> float | Value:
    """`_value` of a score or cost. A constant that is not a float (the checker lets
    none through) is left to its function, to fail at run time as a computed one would."""
    value = _value(gen, e, name)
    if isinstance(value, float) or callable(value):
        return value
    return gen.function(e, name)


def _message(
    gen: CodeGen, message: str | A.Message | None, name: str, typer: Callable[[A.Expr], str]
) -> tuple[str, Value | None]:
    """A plain message as is; one with values as a function that builds it, each
    value shown as its type reads (or as text, when its values are all constant)."""
    if not isinstance(message, A.Message):
        return message or "", None
    pieces = [
        repr(p) if isinstance(p, str) else show_helper(typer(p))(gen.expr(p)) for p in message.parts
    ]
    fn = gen.define(
        f"def {name}(m, t, r, s, now):\n    return ''.join(({', '.join(pieces)},))\n", name
    )
    if all(gen.is_static(v) for v in message.values):
        try:
            text = fn(None, None, None, None, 0.0)
        except Exception:  # left to fail closed at run time, with its error
            return "", fn
        if isinstance(text, str):
            return text, None
    return "", fn


def _compile_policy(
    gen: CodeGen, index: int, policy: A.Policy, path: str, typer: Callable[[A.Expr], str]
) -> CompiledPolicy:
    effect = policy.effect.kind if policy.effect else DENY
    tag = f"p{index}"
    message, message_fn = _message(
        gen, policy.effect.message if policy.effect else None, f"_{tag}_msg", typer
    )
    obligations: list[CompiledObligation] = []
    for j, ob in enumerate(policy.effect.obligations if policy.effect else ()):
        args = tuple(_value(gen, a, f"_{tag}_o{j}_{k}") for k, a in enumerate(ob.args))
        obligations.append(CompiledObligation(ob.name, args, any(callable(a) for a in args)))
    score = (
        DEFAULT_SCORE[effect]
        if policy.score is None
        else _number_value(gen, policy.score, f"_{tag}_score")
    )
    cost = 0.0 if policy.cost is None else _number_value(gen, policy.cost, f"_{tag}_cost")
    when_source = gen.expr(policy.when) if policy.when is not None else "True"
    return CompiledPolicy(
        index=index,
        name=policy.name,
        path=path,
        line=policy.name_span.line,
        ops=frozenset(o.name for o in policy.ops),
        priority=int(_const_number(gen, policy.priority, 0.0)),
        weight=_const_number(gen, policy.weight, 1.0),
        effect=effect,
        message=message,
        message_fn=message_fn,
        obligations=tuple(obligations),
        score=score,
        cost=cost,
        when_source=when_source,
        when_fixed=_fixed_source(gen, policy.when, when_source),
        functions=_names_used(policy, gen.consts, A.Call),
        attributes=_names_used(policy, gen.consts, A.Attr),
        time_exact=all(
            gen.time_kind(e) is None
            for e in (
                policy.when,
                policy.score,
                policy.cost,
                *(
                    a
                    for ob in (policy.effect.obligations if policy.effect else ())
                    for a in ob.args
                ),
                *message_exprs(policy.effect.message if policy.effect else None),
            )
            if e is not None
        ),
    )


def _fixed_source(gen: CodeGen, when: A.Expr | None, noted: str) -> str | None:
    """`when` as generated with `gen.noting` off, if that differs from `noted` (what
    it generated with it on)."""
    if when is None or not gen.noting:
        return None
    gen.noting = False
    try:
        fixed = gen.expr(when)
    finally:
        gen.noting = True
    return None if fixed == noted else fixed


def _names_used(
    policy: A.Policy, consts: dict[str, A.Expr], kind: type[A.Call] | type[A.Attr]
) -> frozenset[str]:
    """Every built-in called (kind Call) or attribute read (kind Attr) by a policy,
    through the constants it uses too: tells a server what it must load or compute."""
    found: set[str] = set()
    seen_consts: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, kind):
            found.add(node.func if isinstance(node, A.Call) else node.name)
        if isinstance(node, A.Name) and node.id in consts and node.id not in seen_consts:
            seen_consts.add(node.id)
            walk(consts[node.id])
        if isinstance(node, tuple):
            for item in node:
                walk(item)
        elif hasattr(node, "__dataclass_fields__"):
            for name in node.__dataclass_fields__:
                walk(getattr(node, name))

    walk(policy)
    return frozenset(found)


def _test_function(
    gen: CodeGen,
    name: str,
    policies: tuple[CompiledPolicy, ...],
    ks: Sequence[int],
    fixed: bool = False,
) -> Test:
    """Generate `name`: the conditions of the policies at plan positions `ks`, each in
    its own try; it returns the positions that fired and those that raised, in order.
    `fixed`: their `when_fixed` forms (see `OpPlan.test_fixed`)."""
    lines = [f"def {name}(m, t, r, s, now):", "    fired = []", "    bad = None"]
    for k in ks:
        p = policies[k]
        probe = gen.rule_probes(p.index)
        when = (p.when_fixed or p.when_source) if fixed else p.when_source
        lines += [
            "    try:",
            *([f"        {probe[0]}"] if probe else []),
            f"        if {when}:",
            f"            fired.append({k})",
            *([f"            {probe[1]}"] if probe else []),
            "    except Exception as exc:",
            f"        bad = (bad or []) + [({k}, exc)]",
        ]
    lines.append("    return fired, bad")
    # what the source above returns; exec'd code has no static type
    return cast(Test, gen.define("\n".join(lines) + "\n", name))


def _reads_memory(source: str) -> bool:
    """Whether generated condition code reads `memory` or `target` (the names `m`,
    `t`: quantified variables are spelt `v_<name>`)."""
    return any(
        isinstance(node, pyast.Name) and node.id in ("m", "t")
        for node in pyast.walk(pyast.parse(source, mode="eval"))
    )


def _plan(gen: CodeGen, op: str, policies: tuple[CompiledPolicy, ...]) -> OpPlan:
    """Generate `_test_<op>`: every policy's condition, each in its own try (for `act`,
    also the request-only and the memory halves)."""
    every = range(len(policies))
    test = _test_function(gen, f"_test_{op}", policies, every)
    test_fixed = (
        _test_function(gen, f"_test_{op}_fixed", policies, every, fixed=True)
        if any(p.when_fixed is not None for p in policies)
        else None
    )
    test_request = test_memory = None
    if op == "act":
        by_memory = [k for k in every if _reads_memory(policies[k].when_source)]
        if len(by_memory) < len(policies):
            alone = [k for k in every if k not in by_memory]
            test_request = _test_function(gen, "_test_act_request", policies, alone)
            test_memory = _test_function(gen, "_test_act_memory", policies, by_memory)
    uses = frozenset(f for p in policies for f in p.functions)
    reads = frozenset(a for p in policies for a in p.attributes)
    return OpPlan(
        policies,
        test,
        Decision(ALLOW, 1.0, 0.0),
        tuple(p.static for p in policies),
        uses,
        reads,
        reusable=all(p.time_exact for p in policies),
        test_request=test_request,
        test_memory=test_memory,
        test_fixed=test_fixed,
        arg_readers=frozenset(p.name for p in policies if "args" in p.attributes),
    )


def codegen_tables(env: Env) -> dict[str, Any]:
    """What a `CodeGen` of `env` is made with: its consts, its named lists, and which
    of those are action lists (they compare names by `facts.action_in`)."""
    return {
        "consts": {n: loc.node.value for n, loc in env.consts.items()},
        "sources": {n: loc.node.patterns for n, loc in env.sources.items()},
        "actions": frozenset(n for n, loc in env.sources.items() if loc.node.kind == "actions"),
    }


def compile_env(env: Env, gen: CodeGen | None = None) -> CompiledPolicySet:
    """Compile a checked environment. Raises ValueError on what the checker rejects.
    `gen`: a code generator of the same consts and sources that instruments what it
    generates (coverage); never given for a set that serves."""
    if gen is None:
        gen = CodeGen(**codegen_tables(env))
    waive = DEFAULT_WAIVE_PENALTY
    if env.resolve is not None:
        for opt in env.resolve.node.options:
            if opt.name == "waive_penalty":
                waive = _const_number(gen, opt.value, DEFAULT_WAIVE_PENALTY)
    typer = policy_typer(gen.consts, gen.sources)
    compiled = tuple(
        _compile_policy(gen, i, loc.node, loc.path, typer)
        for i, loc in enumerate(env.policies.values())
    )
    plans: dict[str, OpPlan] = {}
    for op in OPERATIONS:
        # Highest priority first, then declaration order: resolution walks this order.
        mine = tuple(sorted((p for p in compiled if op in p.ops), key=lambda p: -p.priority))
        plans[op] = _plan(gen, op, mine)
    if not 0.0 <= waive <= 1.0 or math.isnan(waive):
        raise ValueError("waive_penalty must be in [0, 1]")
    patterns = tuple(
        dict.fromkeys(
            gen.pattern(call.args[0])
            for loc in env.policies.values()
            for call in _calls(loc.node, gen.consts)
            if call.func == "acts" and call.args
        )
    )
    return CompiledPolicySet(env.strategy, waive, compiled, plans, patterns)


def _calls(
    node: object, consts: dict[str, A.Expr], seen: frozenset[str] = frozenset()
) -> Iterator[A.Call]:
    """Every call in `node`, through the constants it names (each once per path)."""
    if isinstance(node, A.Call):
        yield node
    if isinstance(node, A.Name) and node.id in consts and node.id not in seen:
        yield from _calls(consts[node.id], consts, seen | {node.id})
    if isinstance(node, tuple):
        for item in node:
            yield from _calls(item, consts, seen)
    elif hasattr(node, "__dataclass_fields__"):
        for name in node.__dataclass_fields__:
            yield from _calls(getattr(node, name), consts, seen)

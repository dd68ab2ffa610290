"""Rule analysis (warnings): never fires, shadowed, conflicting, unused.

Deliberately conservative: a rule is only said to never fire when two of its
`and`-ed conditions put contradictory bounds on the *same* operand (or one is
literally false), so a satisfiable rule is never flagged. Consts are folded to
their literal values first, so `memory.confidence > min_conf` is a bound too.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from . import ast as A
from . import schema as S
from .diagnostics import Diagnostic, SourceFile
from .env import Env, Located
from .fold import Folder, literal_value
from .limits import MAX_NESTED_ITEMS, MAX_RULE_PAIRS
from .spans import sub_span

Lit = float | str | bool  # the value of a literal (durations in seconds)

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


@dataclass(frozen=True)
class Conjunct:
    """One `and`-ed condition: folded form (for logic) and original (for messages)."""

    folded: A.Expr
    original: A.Expr


@dataclass(frozen=True)
class Bound:
    """`operand op value`, the shape the contradiction logic understands."""

    operand: A.Expr | None  # None: a comparison of two literals (value: the pair)
    op: str  # or a literal truth value (kind "truth")
    value: Lit | tuple[Lit, Lit]
    kind: str


@dataclass
class _Rule:
    name: str
    loc: Located[A.Policy]
    policy: A.Policy
    ops: frozenset[str]
    conjuncts: list[Conjunct]
    priority: float | None  # None: not a constant
    folded: frozenset[A.Expr] = field(init=False)  # the conjuncts, for `_shadows`

    def __post_init__(self) -> None:
        self.folded = frozenset(c.folded for c in self.conjuncts)

    @property
    def effect(self) -> str:
        return self.policy.effect.kind if self.policy.effect else ""

    def where(self) -> str:
        s = self.policy.name_span
        return f"{self.loc.path}:{s.line}:{s.column}"


def analyze(env: Env, skip: Collection[str] = ()) -> list[Diagnostic]:
    """W401-W404 for the policies of `env` (those named in `skip` are left out)."""
    folder = Folder({n: loc.node.value for n, loc in env.consts.items()})
    rules = [_rule(name, loc, folder) for name, loc in env.policies.items() if name not in skip]
    diags: list[Diagnostic] = []
    live: list[_Rule] = []
    for rule in rules:
        why = contradiction(rule.conjuncts, env.files[rule.loc.path])
        if why is None:
            live.append(rule)
            continue
        diags.append(
            env.files[rule.loc.path].diag(
                "W401",
                rule.policy.name_span,
                f"policy `{rule.name}` can never fire",
                why,
            )
        )
    shadowed: set[tuple[str, str]] = set()
    # W402 and W403 compare rules pairwise: a set of many rules is compared up to a
    # budget of pairs, then W408 says where it stopped (before: 2,000 rules took 18 s
    # to lint, and a LintPolicy of a few MB would have run for days).
    budget = MAX_RULE_PAIRS
    stopped: _Rule | None = None
    for low in live:
        if budget < len(live):
            stopped = low
            break
        budget -= len(live)
        for high in live:
            reason = _shadows(high, low, env.strategy) if high is not low else None
            if reason is not None:
                shadowed.add((high.name, low.name))
                diags.append(_shadow_diag(env, high, low, reason))
                break
    by_priority: dict[float | None, list[_Rule]] = {}
    for rule in live:  # only rules of one (constant) priority can conflict
        if rule.priority is not None:
            by_priority.setdefault(rule.priority, []).append(rule)
    pairs = ((a, b) for same in by_priority.values() for a, b in itertools.combinations(same, 2))
    for a, b in pairs:
        if stopped is not None and budget <= 0:
            break
        budget -= 1
        if budget <= 0 and stopped is None:
            stopped = b
        if (a.name, b.name) in shadowed or (b.name, a.name) in shadowed:
            continue
        if _conflict(a, b, env):
            ops = ", ".join(f"`{o}`" for o in sorted(a.ops & b.ops))
            diags.append(
                env.files[b.loc.path].diag(
                    "W403",
                    b.policy.name_span,
                    f"policy `{b.name}` conflicts with `{a.name}` at equal priority",
                    f"`{a.name}` ({a.where()}) also applies to {ops} at priority "
                    f"{_num(a.priority)} and decides `{a.effect}`; give them different "
                    "priorities or exclusive conditions",
                )
            )
    if stopped is not None:
        diags.append(
            env.files[stopped.loc.path].diag(
                "W408",
                stopped.policy.name_span,
                f"rule analysis stopped here: {len(live):,} rules are more than "
                f"{MAX_RULE_PAIRS:,} pairs to compare",
                "shadowed (W402) and conflicting (W403) rules are not all reported; "
                "the set is checked and served as usual",
            )
        )
    diags.extend(_unused(env))
    for rule in rules:
        diags.extend(_walks_inside_quantifiers(env, rule.loc))
    return diags


_WALKS = frozenset({"ancestors", "descendants", "lineage", "origins"})


def _walks_inside_quantifiers(env: Env, loc: Located[A.Policy]) -> Iterator[Diagnostic]:
    """W406 at each lineage walk inside the body of a quantifier over a walk: evaluated
    once per item, it multiplies the lineage's size (a walk per argument of an act is
    the arguments' count times it: not said), and one evaluation goes through at most
    MAX_NESTED_ITEMS such items before the rule fails closed (`codegen.rt_budget`)."""
    src = env.files[loc.path]
    said: set[int] = set()  # a walk inside two quantifiers is said once
    for expr in _exprs_of(loc.node):
        for q in _walk(expr):
            if not (  # over a walk: a walk per item is lineage times lineage
                isinstance(q, A.Quant)
                and isinstance(q.collection, A.Call)
                and q.collection.func in _WALKS
            ):
                continue
            for inner in _walk(q.body):
                if isinstance(inner, A.Call) and inner.func in _WALKS and id(inner) not in said:
                    said.add(id(inner))
                    yield src.diag(
                        "W406",
                        inner.span,
                        f"`{inner.func}(...)` inside a quantifier: walked once per item of "
                        "the list outside, so its cost multiplies the lineage's size",
                        f"one evaluation goes through at most {MAX_NESTED_ITEMS:,} items "
                        "this way and fails closed past that; quantify over the walk once "
                        "if you can",
                    )


# ---------------------------------------------------------------- rules
def _rule(name: str, loc: Located[A.Policy], folder: Folder) -> _Rule:
    p = loc.node
    conjuncts: list[Conjunct] = []
    if p.when is not None:
        for original in flatten_and(p.when):
            for folded in flatten_and(folder.fold(original)):
                if folded != A.Bool(True):
                    conjuncts.append(Conjunct(folded, original))
    priority: float | None = 0.0
    if p.priority is not None:
        value = folder.fold(p.priority)
        priority = value.value if isinstance(value, A.Number) else None
    return _Rule(name, loc, p, frozenset(o.name for o in p.ops), conjuncts, priority)


def flatten_and(expr: A.Expr) -> list[A.Expr]:
    if isinstance(expr, A.Binary) and expr.op == "and":
        return [*flatten_and(expr.left), *flatten_and(expr.right)]
    return [expr]


def _shadows(high: _Rule, low: _Rule, strategy: str) -> str | None:
    """Why `high` decides whenever `low` applies ("priority" or "deny"), if it does.

    `high` must cover all of `low`'s operations and its conjuncts must be a
    subset of `low`'s, so it applies whenever `low` does.
    """
    if not low.ops or not low.ops <= high.ops:
        return None
    if not high.folded <= low.folded:
        return None
    higher = high.priority is not None and low.priority is not None and high.priority > low.priority
    if strategy == "priority" and higher:
        return "priority"
    overrides = strategy == "deny_overrides" or higher
    if high.effect == "deny" and low.effect != "deny" and overrides:
        return "deny"
    return None


def _shadow_diag(env: Env, high: _Rule, low: _Rule, reason: str) -> Diagnostic:
    if reason == "priority":
        why = (
            f"`{high.name}` ({high.where()}, priority {_num(high.priority)}) applies "
            f"whenever `{low.name}` does and is decided first"
        )
    else:
        why = (
            f"`{high.name}` ({high.where()}) denies whenever `{low.name}` applies, "
            "and deny overrides"
        )
    return env.files[low.loc.path].diag(
        "W402",
        low.policy.name_span,
        f"policy `{low.name}` is shadowed by `{high.name}`",
        why,
    )


def _conflict(a: _Rule, b: _Rule, env: Env) -> bool:
    if a.priority is None or a.priority != b.priority:
        return False
    if not a.ops & b.ops or not a.effect or not b.effect or a.effect == b.effect:
        return False
    return contradiction([*a.conjuncts, *b.conjuncts], None) is None


# ---------------------------------------------------------------- contradictions
def contradiction(conjuncts: list[Conjunct], src: SourceFile | None) -> str | None:
    """Why these conjuncts can never all hold, or None if they might."""
    bounds: list[tuple[Bound, Conjunct]] = []
    for c in conjuncts:
        b = bound_of(c.folded)
        if b is None:
            continue
        if b.operand is None:
            if not _holds(b.value, b.op, b.kind):
                return f"{_quote(src, c.original)} is always false"
            continue
        bounds.append((b, c))
    # Only bounds on one operand can contradict, and a bound never contradicts itself:
    # pairs within each group of distinct bounds (a long chain stays linear).
    groups: dict[tuple[A.Expr | None, str], dict[tuple[str, object], tuple[Bound, Conjunct]]]
    groups = {}
    for b, c in bounds:
        groups.setdefault((b.operand, b.kind), {}).setdefault((b.op, b.value), (b, c))
    found: tuple[int, int, Conjunct, Conjunct] | None = None
    order = {id(c): k for k, (_, c) in enumerate(bounds)}
    for group in groups.values():
        members = list(group.values())
        if len(members) > _PAIRWISE:
            members = _tightest(members)
        for (b1, c1), (b2, c2) in itertools.combinations(members, 2):
            if _disjoint(b1, b2):
                key = (order[id(c1)], order[id(c2)], c1, c2)
                if found is None or key[:2] < found[:2]:
                    found = key
                break
    if found is not None:
        c1, c2 = found[2], found[3]
        if c1.original is c2.original:
            return f"{_quote(src, c1.original)} is always false"
        return f"{_quote(src, c1.original)} contradicts {_quote(src, c2.original)}"
    return _unknown_vs_lineage(conjuncts, src)


_PAIRWISE = 64  # distinct bounds on one operand compared pairwise; more: the tightest


def _tightest(members: list[tuple[Bound, Conjunct]]) -> list[tuple[Bound, Conjunct]]:
    """The bounds that decide whether a large group is contradictory: two `==` of
    different values, the strongest lower and upper bound, and every `!=` only when
    an `==` could meet it. Linear, for chains far longer than any written by hand."""
    eqs = [m for m in members if m[0].op == "=="]
    out = eqs[:2]
    if out and (len(eqs) == 1 or eqs[0][0].value == eqs[1][0].value):
        out += [m for m in members if m[0].op == "!=" and m[0].value == out[0][0].value][:1]
    for ops in ((">", ">="), ("<", "<=")):
        cands = [m for m in members if m[0].op in ops]
        if cands and not isinstance(cands[0][0].value, bool):
            try:
                pick = max if ops[0] == ">" else min
                best = pick(
                    cands, key=lambda m: (m[0].value, (m[0].op in ("<", ">")) == (ops[0] == ">"))
                )
            except TypeError:  # mixed kinds cannot be ordered: no finer reasoning
                continue
            out.append(best)
    return out


_LINEAGE_FUNCS = ("age", "ancestors", "descendants", "lineage")


def _unknown_vs_lineage(conjuncts: list[Conjunct], src: SourceFile | None) -> str | None:
    """`unknown(memory)` with a read of `memory`'s lineage: the read skips the rule."""
    unknown: dict[str, Conjunct] = {}
    for c in conjuncts:
        root = _unknown_root(c.folded)
        if root is not None:
            unknown.setdefault(root, c)
    if not unknown:
        return None
    for c in conjuncts:
        for root in _lineage_reads(c.folded):
            if root in unknown:
                return (
                    f"{_quote(src, unknown[root].original)} holds only without recorded "
                    f"lineage, but {_quote(src, c.original)} reads it (a rule that reads "
                    "missing lineage does not apply)"
                )
    return None


def _unknown_root(expr: A.Expr) -> str | None:
    """`R` when the conjunct is `unknown(R)` or `R.known == false`."""
    if (
        isinstance(expr, A.Call)
        and expr.func == "unknown"
        and len(expr.args) == 1
        and isinstance(expr.args[0], A.Name)
    ):
        return expr.args[0].id
    b = bound_of(expr)
    if (
        b is not None
        and isinstance(b.operand, A.Attr)
        and b.operand.name == "known"
        and isinstance(b.operand.obj, A.Name)
        and b.kind == S.BOOL
        and ((b.op == "==" and b.value is False) or (b.op == "!=" and b.value is True))
    ):
        return b.operand.obj.id
    return None


def _lineage_reads(expr: A.Expr) -> Iterator[str]:
    """Roots whose lineage is read wherever `expr` is evaluated (no short-circuit)."""
    if isinstance(expr, A.Attr):
        obj = expr.obj
        if isinstance(obj, A.Name) and S.ROOTS.get(obj.id) == S.MEMORY:
            spec = S.MEMORY_ATTRS.get(expr.name)
            if spec is not None and spec.lineage:
                yield obj.id
        yield from _lineage_reads(obj)
    elif isinstance(expr, A.Call):
        first = expr.args[0] if expr.args else None
        if expr.func in _LINEAGE_FUNCS and isinstance(first, A.Name):
            yield first.id
        for arg in expr.args:
            yield from _lineage_reads(arg)
    elif isinstance(expr, A.Binary) and expr.op not in ("and", "or"):
        yield from _lineage_reads(expr.left)
        yield from _lineage_reads(expr.right)
    elif isinstance(expr, A.Unary):
        yield from _lineage_reads(expr.operand)
    elif isinstance(expr, A.Quant):
        yield from _lineage_reads(expr.collection)
    elif isinstance(expr, A.Cond):
        yield from _lineage_reads(expr.test)
    elif isinstance(expr, A.ListLit):
        for item in expr.items:
            yield from _lineage_reads(item)


def _quote(src: SourceFile | None, expr: A.Expr) -> str:
    text = src.snippet(expr.span) if src is not None else ""
    return f"`{text}`" if text else "a condition"


def _literal(expr: A.Expr) -> tuple[Lit, str] | None:
    if isinstance(expr, A.Name) and expr.id in S.SYMBOLS:
        return expr.id, S.STRING
    value = literal_value(expr)
    if value is None:
        return None
    kinds: dict[type[A.Expr], str] = {
        A.Number: S.NUMBER,
        A.Duration: S.DURATION,
        A.Str: S.STRING,
        A.Bool: S.BOOL,
    }
    return value, kinds[type(expr)]


def bound_of(expr: A.Expr) -> Bound | None:
    """Read a conjunct as `operand op literal` (or a literal truth value)."""
    if isinstance(expr, A.Bool):
        return Bound(None, "==", expr.value, "truth")
    negate = False
    if isinstance(expr, A.Unary) and expr.op == "not":
        negate, expr = True, expr.operand
    if isinstance(expr, A.Binary) and expr.op in _FLIP:
        left, right = _literal(expr.left), _literal(expr.right)
        op = _NEGATE[expr.op] if negate else expr.op
        if left is not None and right is not None:
            if left[1] != right[1]:
                return None
            return Bound(None, op, (left[0], right[0]), left[1])
        if right is not None:
            return Bound(expr.left, op, right[0], right[1])
        if left is not None:
            return Bound(expr.right, _FLIP[op], left[0], left[1])
    if isinstance(expr, A.Binary) and expr.op in ("and", "or"):
        return None
    if isinstance(expr, A.Binary | A.Quant | A.Call | A.Attr | A.Name):
        # any other condition: `x` is `x == true`, `not x` is `x == false`
        return Bound(expr, "==", not negate, S.BOOL)
    return None


def _holds(value: Lit | tuple[Lit, Lit], op: str, kind: str) -> bool:
    """Truth of a literal-only conjunct (`false`, `1 > 2`)."""
    if kind == "truth" or not isinstance(value, tuple):
        return bool(value)
    a, b = value
    return _compare(a, op, b)


def _compare(a: object, op: str, b: object) -> bool:
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if isinstance(a, bool) or isinstance(b, bool):
        return True  # ordering booleans is a type error, not a contradiction
    return _ordered(a, op, b)


_O = TypeVar("_O", str, float)


def _order(a: _O, op: str, b: _O) -> bool:
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _ordered(a: object, op: str, b: object) -> bool:
    """`a op b` for an ordering `op`, between two strings or two numbers."""
    if isinstance(a, str) and isinstance(b, str):
        return _order(a, op, b)
    if isinstance(a, int | float) and isinstance(b, int | float):
        return _order(a, op, b)
    raise TypeError(
        f"'{op}' not supported between instances of '{type(a).__name__}' and '{type(b).__name__}'"
    )


def _disjoint(b1: Bound, b2: Bound) -> bool:
    """Whether `x op1 v1` and `x op2 v2` can never both hold."""
    if b1.op == "!=" and b2.op == "!=":
        return False
    if b1.op == "==":
        return not _compare(b1.value, b2.op, b2.value)
    if b2.op == "==":
        return not _compare(b2.value, b1.op, b1.value)
    if "!=" in (b1.op, b2.op) or b1.kind == S.BOOL:
        return False
    lo = [b for b in (b1, b2) if b.op in (">", ">=")]
    hi = [b for b in (b1, b2) if b.op in ("<", "<=")]
    if len(lo) != 1 or len(hi) != 1:
        return False
    low, high = lo[0], hi[0]
    if _ordered(low.value, ">", high.value):
        return True
    return low.value == high.value and (low.op == ">" or high.op == "<")


# ---------------------------------------------------------------- unused names
def _unused(env: Env) -> list[Diagnostic]:
    used: set[str] = set()
    decls: list[Located[A.Const | A.Policy | A.Test]] = [
        *env.consts.values(),
        *env.policies.values(),
        *env.tests,
    ]
    for loc in decls:
        for expr in _exprs_of(loc.node):
            used.update(n.id for n in _walk(expr) if isinstance(n, A.Name))
    if env.resolve is not None:
        for opt in env.resolve.node.options:
            used.update(n.id for n in _walk(opt.value) if isinstance(n, A.Name))
    out: list[Diagnostic] = []
    tables: tuple[tuple[str, dict[str, Located[A.Const]] | dict[str, Located[A.Sources]]], ...] = (
        ("const", env.consts),
        ("sources", env.sources),
    )
    for what, table in tables:
        for name, defined in table.items():
            if name in used:
                continue
            src = env.files[defined.path]
            span = sub_span(src, defined.node.span, what + r"\s+", name)
            label = "const" if what == "const" else "source list"
            out.append(
                src.diag(
                    "W404",
                    span,
                    f"{label} `{name}` is never used",
                    "remove it, or use it in a policy",
                )
            )
    return out


def _exprs_of(node: object) -> Iterator[A.Expr]:
    if isinstance(node, A.Const):
        yield node.value
    elif isinstance(node, A.Policy):
        for e in (node.when, node.priority, node.weight, node.score, node.cost):
            if e is not None:
                yield e
        if node.effect is not None:
            for ob in node.effect.obligations:
                yield from ob.args
            if isinstance(node.effect.message, A.Message):  # a const only shown is used
                yield from node.effect.message.values
    elif isinstance(node, A.Test):
        for stmt in node.stmts:
            if isinstance(stmt, A.GivenMemory | A.GivenRequest | A.GivenGrant):
                yield from (f.value for f in stmt.fields)
            elif isinstance(stmt, A.GivenCalls | A.GivenActs):
                yield stmt.count
                if stmt.at is not None:
                    yield stmt.at
            else:
                for ob in (*stmt.with_obligations, *stmt.without_obligations):
                    yield from ob.args


def _walk(expr: A.Expr) -> Iterator[A.Expr]:
    yield expr
    if isinstance(expr, A.Attr):
        yield from _walk(expr.obj)
    elif isinstance(expr, A.Call | A.ListLit):
        for child in expr.args if isinstance(expr, A.Call) else expr.items:
            yield from _walk(child)
    elif isinstance(expr, A.Quant):
        yield from _walk(expr.collection)
        yield from _walk(expr.body)
    elif isinstance(expr, A.Unary):
        yield from _walk(expr.operand)
    elif isinstance(expr, A.Binary):
        yield from _walk(expr.left)
        yield from _walk(expr.right)
    elif isinstance(expr, A.Cond):
        for child in (expr.test, expr.then, expr.otherwise):
            yield from _walk(child)


def _num(v: float | None) -> str:
    if v is None:
        return "?"
    return str(int(v)) if v == v and abs(v) != float("inf") and v == int(v) else repr(v)

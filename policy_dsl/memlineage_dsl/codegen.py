"""Expression AST -> Python source text, evaluated against (m, t, r, s, now).

`m` is the memory under decision, `t` the target, `r` the request, `s` the
lineage snapshot and `now` the decision time. Constants are inlined, source
lists become precompiled matchers, quantifiers become generator expressions.
Generated code is compiled once per policy set (OPA's "prepared query").
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from . import ast as A
from .facts import (
    Argument,
    Grant,
    LineageSnapshot,
    Memory,
    MemoryFacts,
    Request,
    UnknownMemory,
    UnknownProvenance,
    covering_grant,
    user_made,
)
from .horizon import LIN, MOVING, OPAQUE, REL, VAL
from .limits import MAX_NESTED_ITEMS
from .lineage_bound import LineageCut
from .matchers import ActionMatcher, SourceMatcher, glob_match
from .messages import SHOW
from .schema import SYMBOLS

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparisonT

ROOT_VARS = {"memory": "m", "target": "t", "request": "r"}


# The runtime of the generated code. Its arguments are whatever the policy computed
# (the checker typed them; a value of another type fails the rule at run time).
def _known(mem: Memory) -> Memory:
    if not mem.known:
        raise UnknownProvenance(f"memory `{mem.id}` has no recorded lineage")
    return mem


def rt_ancestors(
    s: LineageSnapshot, mem: Memory, depth: float | None = None
) -> Sequence[MemoryFacts]:
    return s.ancestors(_known(mem).id, None if depth is None else int(depth))


def rt_descendants(
    s: LineageSnapshot, mem: Memory, depth: float | None = None
) -> Sequence[MemoryFacts]:
    return s.descendants(_known(mem).id, None if depth is None else int(depth))


def rt_lineage(s: LineageSnapshot, mem: Memory, depth: float | None = None) -> list[Memory]:
    return [_known(mem), *s.ancestors(mem.id, None if depth is None else int(depth))]


def origins_of(s: LineageSnapshot, x: Argument | Memory) -> list[Memory]:
    """The roots of the lineage of `x` (an argument: of each of its sources): every
    memory in it built on nothing, and every dependency with no recorded lineage (an
    unknown origin), each once. Never raises: an unknown memory is its own origin.
    Found once per snapshot for each argument and each memory (by object): arguments
    filled from the same memory share its walk. The list is shared: never mutated."""
    cache: dict[int, tuple[object, list[Memory]]] | None = getattr(s, "origins_cache", None)
    if cache is not None:
        hit = cache.get(id(x))
        if hit is not None and hit[0] is x:
            return hit[1]
    if not isinstance(x, Argument):
        found = _memory_origins(s, x)
    elif len(x.sources) == 1:
        found = origins_of(s, x.sources[0])
    else:
        out: dict[str, Memory] = {}
        for start in x.sources:
            for o in origins_of(s, start):
                out.setdefault(o.id, o)
        found = list(out.values())
    if cache is not None:
        cache[id(x)] = (x, found)
    return found


def _memory_origins(s: LineageSnapshot, start: Memory) -> list[Memory]:
    if not start.known or not isinstance(start, MemoryFacts) or not start.dependencies:
        return [start]
    try:
        walked: Sequence[Memory] = s.ancestors(start.id)
    except LineageCut as cut:
        # past the loaded depth: what was loaded, its unloaded dependencies unknown
        # origins (below), so an act relying on them fails closed as before
        walked = cut.walked
    chain: list[Memory] = [start, *walked]
    ids = {m.id for m in chain}
    out: dict[str, Memory] = {}
    for m in chain:
        deps = m.dependencies if isinstance(m, MemoryFacts) else ()
        # a tool's output is content from outside whatever its inputs were (a tool
        # called with the user's query returns what the world says): an origin too
        if not deps or (isinstance(m, MemoryFacts) and m.creator.kind == "tool"):
            out.setdefault(m.id, m)
        for d in deps:
            if d not in ids:
                out.setdefault(d, UnknownMemory(d, m.namespace))
    return list(out.values())


def cover(s: LineageSnapshot, r: Request, a: Argument, o: Memory, now: float) -> Grant | None:
    """`covering_grant` for one act, found once per (argument, origin): `uncovered`,
    `covered`, `granted`, a denial's reasons and the spend all ask the same."""
    if not r.grants:
        return None
    cache: dict[tuple[int, str, float], tuple[object, Any]] | None = getattr(s, "cover_cache", None)
    key = (id(a), o.id, now)
    if cache is not None:
        hit = cache.get(key)
        if hit is not None and hit[0] is a:
            return cast("Grant | None", hit[1])
    found = covering_grant(r.grants, r.action, a, o, now)
    if cache is not None:
        cache[key] = (a, found)
    return found


def rt_uncovered(s: LineageSnapshot, r: Request, a: Argument, now: float) -> list[Memory]:
    """Origins of `a` that a user did not make and no live grant covers (once per
    argument and snapshot: every act rule of the set asks it of every argument)."""
    cache: dict[tuple[int, str, float], tuple[object, Any]] | None = getattr(s, "cover_cache", None)
    key = (id(a), "", now)  # "" is no memory id: the argument's own entry
    if cache is not None:
        hit = cache.get(key)
        if hit is not None and hit[0] is a:
            return list(hit[1])
    found = [o for o in origins_of(s, a) if not user_made(o) and cover(s, r, a, o, now) is None]
    if cache is not None:
        cache[key] = (a, tuple(found))
    return found


def rt_covered(s: LineageSnapshot, r: Request, a: Argument, now: float) -> bool:
    return bool(a.sources) and not rt_uncovered(s, r, a, now)


def rt_granted(s: LineageSnapshot, r: Request, a: Argument, now: float) -> bool:
    return any(not user_made(o) and cover(s, r, a, o, now) is not None for o in origins_of(s, a))


def rt_pinned(s: LineageSnapshot, r: Request, a: Argument, now: float) -> bool:
    """Every origin a grant covers is covered by one that names the argument's value
    (or digest): the delegation fixed the value, so the source could not choose it."""
    for o in origins_of(s, a):
        if not user_made(o):
            g = cover(s, r, a, o, now)
            if g is not None and not g.pinned:
                return False
    return True


_NONE: Any = object()  # `min`'s default: no item (no value a policy computes is it)


def rt_min(values: Iterable[SupportsRichComparisonT]) -> SupportsRichComparisonT:
    least = min(values, default=_NONE)
    if least is _NONE:
        raise ValueError("min() over an empty collection")
    return least


def rt_max(values: Iterable[SupportsRichComparisonT]) -> SupportsRichComparisonT:
    most = max(values, default=_NONE)
    if most is _NONE:
        raise ValueError("max() over an empty collection")
    return most


# Any operands: a comparison the checker typed may still meet, say, a None at run time.
_COMPARE: dict[str, Callable[[Any, Any], object]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


def rt_timed(s: LineageSnapshot, now: float, kind: str, q: object, op: str, c: object) -> object:
    """`q op c` where `q` moves with time and `c` does not: tell the snapshot."""
    result = _COMPARE[op](q, c)
    s.note(kind, q, c, now)
    return result


class EvaluationBudgetError(Exception):
    """An evaluation went past `MAX_NESTED_ITEMS` in nested quantifiers and walks."""


def rt_budget(spent: list[int], items: Sized) -> Sized:
    """`items` (a collection a nested quantifier goes through, or a walk inside a
    quantifier), counted against the evaluation's budget `spent` (`w`, one list per
    call of a generated function)."""
    spent[0] += len(items)
    if spent[0] > MAX_NESTED_ITEMS:
        raise EvaluationBudgetError(
            f"the evaluation went through more than {MAX_NESTED_ITEMS:,} items in nested "
            "quantifiers and lineage walks inside a quantifier (nesting multiplies a "
            "lineage's size): the rule fails closed"
        )
    return items


def rt_timed_right(
    s: LineageSnapshot, now: float, kind: str, c: object, op: str, q: object
) -> object:
    """`c op q`: the same with the moving value on the right."""
    result = _COMPARE[op](c, q)
    s.note(kind, q, c, now)
    return result


def _quantified(kind: str, var: str, coll: str, body: str) -> str:
    """The generated code of quantifier `kind` of `body` over `var` in `coll`."""
    gen = f"{body} for {var} in {coll}"
    if kind in ("any", "all", "sum"):
        return f"{kind}({gen})"
    if kind == "count":
        return f"sum(1 for {var} in {coll} if {body})"
    return f"_{kind}({gen})"


RUNTIME: dict[str, object] = {
    "_tc": rt_timed,
    "_tc_r": rt_timed_right,
    "_anc": rt_ancestors,
    "_desc": rt_descendants,
    "_lin": rt_lineage,
    "_q": rt_budget,
    "_min": rt_min,
    "_max": rt_max,
    "_glob": glob_match,
    "_origins": origins_of,
    "_uncovered": rt_uncovered,
    "_covered": rt_covered,
    "_granted": rt_granted,
    "_pinned": rt_pinned,
    "UnknownProvenance": UnknownProvenance,
    **SHOW,  # how a message shows each type of value
}


@dataclass
class CodeGen:
    """Translates expressions; collects the globals the generated code needs."""

    consts: dict[str, A.Expr]
    sources: dict[str, tuple[str, ...]]
    globals: dict[str, object] = field(default_factory=lambda: dict(RUNTIME))
    actions: frozenset[str] = frozenset()  # the lists declared with `actions`
    # Off: a comparison of a value that moves with time is written as a plain one, not
    # as `_tc`/`_tc_r` telling the snapshot (the conditions a snapshot that takes no
    # notes is tested with: `OpPlan.test_fixed`).
    noting: bool = True
    _const_stack: tuple[str, ...] = ()
    _nesting: int = 0  # quantifier bodies the expression being generated is inside

    def source_var(self, name: str) -> str:
        var = f"S_{name}"
        if var not in self.globals:
            matcher = ActionMatcher if name in self.actions else SourceMatcher
            self.globals[var] = matcher(self.sources[name])
        return var

    def expr(self, e: A.Expr, scope: frozenset[str] = frozenset()) -> str:
        method: Callable[[A.Expr, frozenset[str]], str] = getattr(self, "_" + type(e).__name__)
        return method(e, scope)

    # -- leaves
    def _Number(self, e: A.Number, scope: frozenset[str]) -> str:
        return repr(e.value)

    def _Duration(self, e: A.Duration, scope: frozenset[str]) -> str:
        return repr(float(e.seconds))

    def _Str(self, e: A.Str, scope: frozenset[str]) -> str:
        return repr(e.value)

    def _Bool(self, e: A.Bool, scope: frozenset[str]) -> str:
        return "True" if e.value else "False"

    def _Now(self, e: A.Now, scope: frozenset[str]) -> str:
        return "now"

    def _Name(self, e: A.Name, scope: frozenset[str]) -> str:
        if e.id in scope:
            return f"v_{e.id}"
        if e.id in ROOT_VARS:
            return ROOT_VARS[e.id]
        if e.id in self.consts:
            if e.id in self._const_stack:
                raise ValueError(f"constant `{e.id}` refers to itself")
            self._const_stack = (*self._const_stack, e.id)
            try:
                return f"({self.expr(self.consts[e.id], frozenset())})"
            finally:
                self._const_stack = self._const_stack[:-1]
        if e.id in self.sources:
            return self.source_var(e.id)
        if e.id in SYMBOLS:
            return repr(e.id)
        raise ValueError(f"unknown name `{e.id}`")

    def _Attr(self, e: A.Attr, scope: frozenset[str]) -> str:
        return f"{self.expr(e.obj, scope)}.{e.name}"

    def _ListLit(self, e: A.ListLit, scope: frozenset[str]) -> str:
        return "(" + "".join(self.expr(i, scope) + ", " for i in e.items) + ")"

    # -- operators
    def _Unary(self, e: A.Unary, scope: frozenset[str]) -> str:
        inner = self.expr(e.operand, scope)
        return f"(not {inner})" if e.op == "not" else f"(-{inner})"

    def _Binary(self, e: A.Binary, scope: frozenset[str]) -> str:
        left = self.expr(e.left, scope)
        if e.op in ("in", "not in", "matches"):
            right_node = e.right
            if (
                isinstance(right_node, A.Name)
                and right_node.id in self.sources
                and (right_node.id not in scope)
            ):
                test = f"{self.source_var(right_node.id)}.match({left})"
            elif e.op == "matches":
                test = f"_glob({left}, {self.expr(right_node, scope)})"
            else:
                test = f"({left} in {self.expr(right_node, scope)})"
            return f"(not {test})" if e.op == "not in" else test
        right = self.expr(e.right, scope)
        if e.op in _COMPARE and self.noting:
            kl, kr = self.time_kind(e.left, scope), self.time_kind(e.right, scope)
            if kl in MOVING and kr is None:
                return f"_tc(s, now, {kl!r}, {left}, {e.op!r}, {right})"
            if kr in MOVING and kl is None:  # still evaluated left first, as written
                return f"_tc_r(s, now, {kr!r}, {left}, {e.op!r}, {right})"
        return f"({left} {e.op} {right})"

    def _Cond(self, e: A.Cond, scope: frozenset[str]) -> str:
        return (
            f"({self.expr(e.then, scope)} if {self.expr(e.test, scope)} "
            f"else {self.expr(e.otherwise, scope)})"
        )

    def _Call(self, e: A.Call, scope: frozenset[str]) -> str:
        args = [self.expr(a, scope) for a in e.args]
        f = e.func
        if f == "age":
            return f"(now - {args[0]}.created_at)"
        if f == "since":
            return f"(now - {args[0]})"
        if f in ("ancestors", "descendants", "lineage"):
            helper = {"ancestors": "_anc", "descendants": "_desc", "lineage": "_lin"}[f]
            walk = f"{helper}(s, {', '.join(args)})"
            return f"_q(w, {walk})" if self._nesting else walk  # a walk per item: budgeted
        if f == "unknown":
            return f"(not {args[0]}.known)"
        if f == "calls":
            return f"s.calls({args[0]}, {args[1]}, now)"
        if f == "len":
            return f"len({args[0]})"
        if f == "acts":
            return f"s.acts({self.pattern(e.args[0])!r}, {args[1]}, now)"
        if f == "origins":
            return f"_origins(s, {args[0]})"
        if f in ("uncovered", "covered", "granted", "pinned"):
            return f"_{f}(s, r, {args[0]}, now)"
        raise ValueError(f"unknown function `{f}`")

    def _Quant(self, e: A.Quant, scope: frozenset[str]) -> str:
        coll = self.expr(e.collection, scope)
        if self._nesting and not coll.startswith("_q(w, "):  # once per item outside
            coll = f"_q(w, {coll})"
        self._nesting += 1
        try:
            body = self.expr(e.body, scope | {e.var})
        finally:
            self._nesting -= 1
        var = f"v_{e.var}"
        getter = self.getter(e, var, body)
        if getter is not None:  # `min(v in L : v.confidence)`: map an attrgetter, in C
            x, walk = self.root_walk(e.collection, scope) or ("", "")
            if walk == "lineage":
                coll = f"(({x},) if ({x}.known and not {x}.dependencies) else {coll})"
            name = e.kind if e.kind in ("any", "all", "sum") else f"_{e.kind}"
            return f"{name}(map({getter}, {coll}))"
        root = self.root_walk(e.collection, scope)
        if root is None:
            return _quantified(e.kind, var, coll, body)
        # a memory built on nothing: no walk, no helper call
        x, walk = root
        bare = f"({x}.known and not {x}.dependencies)"
        if walk == "lineage":  # the memory alone
            return _quantified(e.kind, var, f"(({x},) if {bare} else {coll})", body)
        plain = _quantified(e.kind, var, coll, body)
        empty = {"any": "False", "all": "True", "count": "0", "sum": "0"}.get(e.kind)
        if empty is None:  # min, max: an empty collection raises, as before
            return plain
        return f"({empty} if {bare} else {plain})"

    def getter(self, e: A.Quant, var: str, body: str) -> str | None:
        """The name of an `operator.attrgetter` global for a quantifier whose body is
        only an attribute of its variable (`v.confidence`) and that takes the values
        as they are (min, max, sum, any, all: not count, which tests them), else None."""
        if e.kind == "count" or not body.startswith(var + "."):
            return None
        attr = body[len(var) + 1 :]
        if not attr.isidentifier():
            return None
        name = f"_get_{attr}"
        if name not in self.globals:
            self.globals[name] = operator.attrgetter(attr)
        return name

    def root_walk(self, e: A.Expr, scope: frozenset[str]) -> tuple[str, str] | None:
        """(`m` or `t`, the walk) when `e` is `ancestors(memory)` or `lineage(memory)`
        (of `target` alike) without a depth: over a memory with no dependencies the
        first is empty and the second the memory alone, whatever the snapshot (an
        unknown memory takes the helper, which raises as before)."""
        if (
            isinstance(e, A.Call)
            and e.func in ("ancestors", "lineage")
            and len(e.args) == 1
            and isinstance(e.args[0], A.Name)
            and e.args[0].id in ("memory", "target")
            and e.args[0].id not in scope
        ):
            return ROOT_VARS[e.args[0].id], e.func
        return None

    def pattern(self, e: A.Expr) -> str | tuple[str, ...]:
        """The constant pattern `acts` counts by: a glob, or a named list's globs."""
        if isinstance(e, A.Str):
            return e.value
        if isinstance(e, A.Name):
            if e.id in self.sources:
                return self.sources[e.id]
            if e.id in self.consts:
                return self.pattern(self.consts[e.id])
        value = self.function(e, "_pattern")(None, None, None, None, 0.0)
        if not isinstance(value, str):
            raise ValueError("the pattern of `acts` must be a string constant or a named list")
        return value

    # -- helpers for the compiler
    def is_static(self, e: A.Expr) -> bool:
        """True when `e` reads nothing from the request (foldable at compile time)."""
        if isinstance(e, A.Number | A.Duration | A.Str | A.Bool):
            return True
        if isinstance(e, A.Name):
            if e.id in self.consts:
                return self.is_static(self.consts[e.id])
            return e.id in SYMBOLS and e.id not in ROOT_VARS
        if isinstance(e, A.Unary):
            return self.is_static(e.operand)
        if isinstance(e, A.Binary):
            return self.is_static(e.left) and self.is_static(e.right)
        if isinstance(e, A.ListLit):
            return all(self.is_static(i) for i in e.items)
        if isinstance(e, A.Cond):
            return all(self.is_static(x) for x in (e.test, e.then, e.otherwise))
        return False

    def time_kind(self, e: A.Expr, scope: frozenset[str] = frozenset()) -> str | None:
        """How `e`'s value moves with the clock, the rest of the request fixed: None
        (it does not, or only through comparisons and counts the generated code
        reports), or a `horizon` kind: LIN, REL, VAL or OPAQUE."""
        if isinstance(e, A.Number | A.Duration | A.Str | A.Bool):
            return None
        if isinstance(e, A.Now):
            return LIN
        if isinstance(e, A.Name):
            if e.id not in scope and e.id not in ROOT_VARS and e.id in self.consts:
                return self.time_kind(self.consts[e.id], frozenset())
            return None  # memories, the request, source lists, symbols
        if isinstance(e, A.Attr):
            inner = self.time_kind(e.obj, scope)
            if inner is not None:
                return OPAQUE
            if isinstance(e.obj, A.Name) and e.obj.id == "request" and "request" not in scope:
                return LIN if e.name == "time" else None
            return {"reliability": REL, "value_score": VAL}.get(e.name)
        if isinstance(e, A.Call):
            kinds = [self.time_kind(a, scope) for a in e.args]
            if any(k is not None for k in kinds):
                return OPAQUE
            return LIN if e.func in ("age", "since") else None  # calls(): reported
        if isinstance(e, A.Binary):
            kl, kr = self.time_kind(e.left, scope), self.time_kind(e.right, scope)
            if kl is None and kr is None:
                return None
            if e.op in _COMPARE and OPAQUE not in (kl, kr) and None in (kl, kr):
                return None  # reported by `_tc`: fixed until its crossing
            if e.op in ("+", "-") and kl == LIN and kr is None:
                return LIN
            if e.op == "+" and kr == LIN and kl is None:
                return LIN
            return OPAQUE
        if isinstance(e, A.Unary):
            return None if self.time_kind(e.operand, scope) is None else OPAQUE
        if isinstance(e, A.Cond):
            branches = {self.time_kind(x, scope) for x in (e.test, e.then, e.otherwise)}
            return None if branches == {None} else OPAQUE
        if isinstance(e, A.ListLit):
            return None if all(self.time_kind(i, scope) is None for i in e.items) else OPAQUE
        if isinstance(e, A.Quant):
            over, body = (
                self.time_kind(e.collection, scope),
                self.time_kind(e.body, scope | {e.var}),
            )
            if over is None and body in MOVING and e.kind in ("min", "max"):
                return body  # the least / greatest of values that all move alike
            return None if over is None and body is None else OPAQUE
        return OPAQUE

    def rule_probes(self, index: int) -> tuple[str, str] | None:
        """Statements the test of rule `index` runs before its condition and when it
        fires. None: the set that serves has none; `coverage.CoverageGen` counts."""
        return None

    def function(self, e: A.Expr, name: str) -> Callable[..., object]:
        """Compile `e` into `f(m, t, r, s, now)`."""
        src = f"def {name}(m, t, r, s, now):\n    return {self.expr(e)}\n"
        return self.define(src, name)

    def define(self, src: str, name: str) -> Callable[..., object]:
        if "_q(w, " in src:  # nested quantifiers: the call's budget (`rt_budget`) first
            head, _, rest = src.partition("\n")
            src = f"{head}\n    w = [0]\n{rest}"
        code = compile(src, f"<mlp:{name}>", "exec")
        exec(code, self.globals)
        fn = self.globals[name]
        if not callable(fn):  # `src` defines `name`: never taken
            raise TypeError(f"generated `{name}` is not a function")
        return fn

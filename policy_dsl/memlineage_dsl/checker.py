"""Static checks of a policy set: names, types, policy structure and tests.

`check(env)` walks every declaration (a message's values too) and collects every
problem, then runs the rule analysis (`analysis.py`) on the policies that checked
clean. The whole lint (load, env, check, compile) is `pipeline.lint_texts`."""

from __future__ import annotations

import math

from . import ast as A
from . import schema as S
from .analysis import analyze
from .arith import faults
from .checker_tests import TestBlockChecks
from .diagnostics import Diagnostic, Severity, SourceFile, did_you_mean, sort_diagnostics
from .env import Env, Located
from .fold import Folder
from .globs import empty_class
from .limits import INT32_MAX, INT32_MIN, MAX_COST, MAX_WEIGHT, item_exprs, walk
from .literals import has_infinite_literal, infinite, magnitude, num
from .messages import check_values
from .spans import head_span, sub_span
from .typecheck import ExprChecker, Names, assignable


def check(env: Env) -> list[Diagnostic]:
    """Every name, type, structure and test diagnostic of `env`, plus rule warnings."""
    return _Checker(env).run()


class _Checker(TestBlockChecks):
    def __init__(self, env: Env) -> None:
        self.env = env
        self.diags: list[Diagnostic] = []
        self.folder = Folder({n: loc.node.value for n, loc in env.consts.items()})
        self._const_types: dict[str, str] = {}
        self._active: list[str] = []
        self._cycles: set[frozenset[str]] = set()
        self.policy_names = Names(env.consts, self.const_type, env.sources, roots=True)
        self.plain_names = Names(env.consts, self.const_type, env.sources, roots=False)
        self._overflows: set[int] = set()  # ids of nodes `_check_arith` said overflow

    def run(self) -> list[Diagnostic]:
        self._check_literals()
        self._check_arith()
        self._check_globs()
        for name in self.env.consts:
            self.const_type(name)
            self._check_const_value(name)
        if self.env.resolve is not None:
            self._check_resolve(self.env.resolve)
        broken: set[str] = set()
        for name, loc in self.env.policies.items():
            before = len(self.diags)
            self._check_policy(loc)
            if any(d.severity is Severity.ERROR for d in self.diags[before:]):
                broken.add(name)
        for test in self.env.tests:
            self._check_test(test)
        self.diags.extend(analyze(self.env, skip=broken))
        return sort_diagnostics(self.diags)

    # ------------------------------------------------------------------ numbers
    def _check_literals(self) -> None:
        """Every number and duration written must be finite (`1e309` reads as inf)."""
        decls: list[Located[A.Const] | Located[A.Policy] | Located[A.Test] | Located[A.Resolve]] = [
            *self.env.consts.values(),
            *self.env.policies.values(),
            *self.env.tests,
        ]
        if self.env.resolve is not None:
            decls.append(self.env.resolve)
        for loc in decls:
            src = self.env.files[loc.path]
            for expr in item_exprs(loc.node):
                for node, _ in walk(expr):
                    value = (
                        node.value
                        if isinstance(node, A.Number)
                        else node.seconds
                        if isinstance(node, A.Duration)
                        else 0.0
                    )
                    if not math.isfinite(value):
                        what = "number" if isinstance(node, A.Number) else "duration"
                        self.diags.append(
                            src.diag(
                                "E203",
                                node.span,
                                f"{what} `{src.snippet(node.span)}` is too "
                                "large: it reads as infinity",
                                "numbers must be finite (at most about 1.8e308)",
                            )
                        )

    def _check_arith(self) -> None:
        """Arithmetic of constants that cannot work (`arith.faults`): a divisor that is
        always 0, `min`/`max` of `[]`, an overflow. Before, a division by a zero const
        passed lint and failed its rule for every request (an outside audit)."""
        located: list[tuple[str, A.Expr]] = [
            (loc.path, loc.node.value) for loc in self.env.consts.values()
        ]
        for loc in self.env.policies.values():
            p = loc.node
            exprs = [e for e in (p.when, p.score, p.cost) if e is not None]
            if p.effect is not None:
                exprs += [a for ob in p.effect.obligations for a in ob.args]
                if isinstance(p.effect.message, A.Message):
                    exprs += p.effect.message.values
            located += [(loc.path, e) for e in exprs]
        for path, expr in located:
            src = self.env.files[path]
            for f in faults(expr, self.folder.const):
                if f.overflow:
                    self._overflows.add(id(f.node))
                code = "E203" if f.always or f.overflow else "W407"
                message = f.message
                if code == "W407":
                    message += ": the rule fails closed (DENY) for every request that reaches it"
                self.diags.append(src.diag(code, f.node.span, message, f.help))

    def _check_globs(self) -> None:
        """A glob written in the set that can match nothing (`[z-a]`) is E203: a list or
        a `matches` holding it silently listed nothing (a `deny` that never fired)."""
        for lst in self.env.sources.values():
            src = self.env.files[lst.path]
            for pattern in lst.node.patterns:
                self._empty_glob(src, pattern, self._pattern_span(src, lst.node, pattern))
        for loc in self.env.policies.values():
            src = self.env.files[loc.path]
            p = loc.node
            exprs = [p.when] if p.when is not None else []
            if p.effect is not None and isinstance(p.effect.message, A.Message):
                exprs += p.effect.message.values
            for expr in exprs:
                for node, _ in walk(expr):
                    if isinstance(node, A.Binary) and node.op == "matches":
                        right = node.right
                        items = right.items if isinstance(right, A.ListLit) else (right,)
                        for item in items:  # a const is reported where it is used
                            value = self.folder.fold(item)
                            if isinstance(value, A.Str):
                                self._empty_glob(src, value.value, item.span)

    def _empty_glob(self, src: SourceFile, pattern: str, span: A.Span) -> None:
        cls = empty_class(pattern)
        if cls is not None:
            self.diags.append(
                src.diag(
                    "E203",
                    span,
                    f"glob `{pattern}` can match nothing: its class `{cls}` holds no character",
                    "a range goes from the lower character to the higher, e.g. `[a-z]`, `[0-9]`",
                )
            )

    @staticmethod
    def _pattern_span(src: SourceFile, node: A.Sources, pattern: str) -> A.Span:
        """Where `pattern` is written in the list `node` (its name if not found)."""
        quoted = '"' + pattern.replace("\\", "\\\\").replace('"', '\\"') + '"'
        for line in range(node.span.line, node.span.end_line + 1):
            at = src.line(line).find(quoted, node.span.column - 1 if line == node.span.line else 0)
            if at >= 0:
                return A.Span(line, at + 1, line, at + 1 + len(quoted))
        return sub_span(src, node.span, node.kind + r"\s+", node.name)

    def _overflow_within(self, expr: A.Expr) -> bool:
        """An overflow inside `expr` was reported at its place (`_check_arith`)."""
        return bool(self._overflows) and any(id(n) in self._overflows for n, _ in walk(expr))

    def _check_const_value(self, name: str) -> None:
        """A const that folds to a number must fold to a finite one (`1e308 * 10`)."""
        loc = self.env.consts[name]
        value = self.folder.const(name)
        if (
            infinite(value)
            and not has_infinite_literal(loc.node.value)
            and not self._overflow_within(loc.node.value)
        ):
            src = self.env.files[loc.path]
            self.diags.append(
                src.diag(
                    "E203",
                    loc.node.value.span,
                    f"const `{name}` overflows: it evaluates to {num(magnitude(value))}",
                    "numbers must be finite (at most about 1.8e308)",
                )
            )

    def _ex(self, path: str, names: Names) -> ExprChecker:
        return ExprChecker(self.env.files[path], names, self.diags)

    # ------------------------------------------------------------------ consts
    def const_type(self, name: str) -> str:
        """The type of const `name`, checking its definition the first time."""
        if name in self._const_types:
            return self._const_types[name]
        if name in self._active:
            self._report_cycle(self._active[self._active.index(name) :])
            return S.ANY
        loc = self.env.consts[name]
        self._active.append(name)
        try:
            t = self._ex(loc.path, self.plain_names).infer(loc.node.value, {})
        finally:
            self._active.pop()
        self._const_types[name] = t
        return t

    def _report_cycle(self, cycle: list[str]) -> None:
        if frozenset(cycle) in self._cycles:
            return
        self._cycles.add(frozenset(cycle))
        loc = self.env.consts[cycle[0]]
        src = self.env.files[loc.path]
        chain = " -> ".join([*cycle, cycle[0]])
        self.diags.append(
            src.diag(
                "E111",
                sub_span(src, loc.node.span, r"const\s+", cycle[0]),
                f"const `{cycle[0]}` is defined in terms of itself: {chain}",
                "a const may only use other consts that do not refer back to it",
            )
        )

    # ------------------------------------------------------------------ resolve
    def _check_resolve(self, loc: Located[A.Resolve]) -> None:
        node = loc.node
        src = self.env.files[loc.path]
        if node.strategy not in S.STRATEGIES:
            self.diags.append(
                src.diag(
                    "E108",
                    node.strategy_span,
                    f"unknown resolution strategy `{node.strategy}`",
                    did_you_mean(node.strategy, S.STRATEGIES)
                    or "use one of " + ", ".join(f"`{s}`" for s in S.STRATEGIES),
                )
            )
        ex = self._ex(loc.path, self.plain_names)
        for opt in node.options:
            want = S.RESOLVE_OPTIONS.get(opt.name)
            if want is None:
                self.diags.append(
                    src.diag(
                        "E110",
                        head_span(opt.span, opt.name),
                        f"unknown option `{opt.name}`",
                        did_you_mean(opt.name, S.RESOLVE_OPTIONS)
                        or "options: " + ", ".join(f"`{o}`" for o in S.RESOLVE_OPTIONS),
                    )
                )
                ex.infer(opt.value, {})
                continue
            if want == S.NUMBER:  # set once for the whole set: a constant (before: an
                # expression reading the request, or dividing by zero, passed lint and
                # failed the build as E601 at 1:1 of another file; an outside audit)
                self._check_constant(src, ex, opt.value, opt.name, integer=False)
            else:
                ex.expect(opt.value, want, f"`{opt.name}`")
            self._check_range(src, opt.value, f"`{opt.name}`", low=0.0, high=1.0)

    # ------------------------------------------------------------------ policies
    def _check_policy(self, loc: Located[A.Policy]) -> None:
        p = loc.node
        src = self.env.files[loc.path]
        ex = self._ex(loc.path, self.policy_names)
        if not p.ops:
            self.diags.append(
                src.diag(
                    "E301",
                    p.name_span,
                    f"policy `{p.name}` has no `on` clause",
                    "say which operations it governs, e.g. `on read, act`",
                )
            )
        for op in p.ops:
            self._check_op(src, op)
        if p.when is not None:
            ex.expect(p.when, S.BOOL, "`when`")
        if p.effect is None:
            self.diags.append(
                src.diag(
                    "E302",
                    p.name_span,
                    f"policy `{p.name}` has no effect",
                    "add `allow`, `deny` or `degrade`",
                )
            )
        else:
            for ob in p.effect.obligations:
                self._check_obligation(src, ex, ob)
            check_values(ex, p.effect.message)
        if p.score is not None:
            ex.expect(p.score, S.NUMBER, "`score`")
            self._check_range(src, p.score, "`score`", low=0.0, high=1.0)
        if p.cost is not None:
            ex.expect(p.cost, S.NUMBER, "`cost`")
            self._check_range(src, p.cost, "`cost`", low=0.0, high=MAX_COST)
        if p.priority is not None:
            self._check_constant(src, ex, p.priority, "priority", integer=True)
        if p.weight is not None:
            self._check_constant(src, ex, p.weight, "weight", integer=False)

    def _check_op(self, src: SourceFile, op: A.Ident) -> None:
        if op.name not in S.OPERATIONS:
            self.diags.append(
                src.diag(
                    "E106",
                    op.span,
                    f"unknown operation `{op.name}`",
                    did_you_mean(op.name, S.OPERATIONS)
                    or "operations: " + ", ".join(f"`{o}`" for o in S.OPERATIONS),
                )
            )

    def _check_obligation(self, src: SourceFile, ex: ExprChecker, ob: A.Obligation) -> None:
        spec = S.OBLIGATIONS.get(ob.name)
        if spec is None:
            self.diags.append(
                src.diag(
                    "E107",
                    head_span(ob.span, ob.name),
                    f"unknown obligation `{ob.name}`",
                    did_you_mean(ob.name, S.OBLIGATIONS)
                    or "obligations: " + ", ".join(f"`{o}`" for o in S.OBLIGATIONS),
                )
            )
            for arg in ob.args:
                ex.infer(arg, {})
            return
        most, least = len(spec.params), len(spec.params) - spec.optional
        if not least <= len(ob.args) <= most:
            want = f"{least} to {most}" if least != most else str(most)
            plural = "" if most == 1 and least == most else "s"
            self.diags.append(
                src.diag(
                    "E105",
                    ob.span,
                    f"`{ob.name}` takes {want} argument{plural}, got {len(ob.args)}",
                    f"`{ob.name}`: {spec.doc}",
                )
            )
        for arg, want in zip(ob.args, spec.params, strict=False):
            ex.expect(arg, want, f"argument of `{ob.name}`")
        for arg in ob.args[len(spec.params) :]:
            ex.infer(arg, {})
        if ob.name == "downrank" and ob.args:
            value = self.folder.fold(ob.args[0])
            if (
                isinstance(value, A.Number)
                and not 0.0 < value.value <= 1.0
                and not (has_infinite_literal(ob.args[0]))
            ):  # a literal inf is reported as such
                self.diags.append(
                    src.diag(
                        "E203",
                        ob.args[0].span,
                        f"`downrank` factor must be in (0, 1], got {num(value.value)}",
                        "e.g. `downrank(0.5)` halves its rank",
                    )
                )

    def _check_range(
        self, src: SourceFile, expr: A.Expr, what: str, low: float, high: float | None
    ) -> None:
        """Range-check the literal (or const) values an expression can take."""
        if isinstance(expr, A.Cond):
            self._check_range(src, expr.then, what, low, high)
            self._check_range(src, expr.otherwise, what, low, high)
            return
        value = self.folder.fold(expr)
        if not isinstance(value, A.Number):
            return
        v = value.value
        if not math.isfinite(v):
            if not has_infinite_literal(expr) and not self._overflow_within(expr):
                self.diags.append(
                    src.diag(
                        "E203",
                        expr.span,
                        f"{what} overflows: it evaluates to {num(v)}",
                        "numbers must be finite (at most about 1.8e308)",
                    )
                )
        elif v < low or (high is not None and v > high):
            bounds = f"in [{num(low)}, {num(high)}]" if high is not None else (f">= {num(low)}")
            self.diags.append(src.diag("E203", expr.span, f"{what} must be {bounds}, got {num(v)}"))

    def _check_constant(
        self, src: SourceFile, ex: ExprChecker, expr: A.Expr, what: str, integer: bool
    ) -> None:
        t = ex.expect(expr, S.NUMBER, f"`{what}`")
        if not assignable(t, S.NUMBER) or t == S.ANY:
            return
        value = self.folder.fold(expr)
        kind = "integer" if integer else "number"
        if not isinstance(value, A.Number):
            self.diags.append(
                src.diag(
                    "E202",
                    expr.span,
                    f"`{what}` must be a constant {kind}",
                    "use a number literal or a `const`",
                )
            )
        elif not math.isfinite(value.value):
            if not has_infinite_literal(expr):  # a literal inf is reported as such
                self.diags.append(
                    src.diag(
                        "E203",
                        expr.span,
                        f"`{what}` overflows: it evaluates to {num(value.value)}",
                        "numbers must be finite",
                    )
                )
        elif integer and value.value != int(value.value):
            self.diags.append(
                src.diag(
                    "E202",
                    expr.span,
                    f"`{what}` must be a constant integer, got {value.value}",
                )
            )
        elif integer and not INT32_MIN <= value.value <= INT32_MAX:
            self.diags.append(
                src.diag(
                    "E203",
                    expr.span,
                    f"`{what}` must be in [{INT32_MIN}, {INT32_MAX}], got {num(value.value)}",
                    "a priority is a 32-bit integer; only the order of priorities matters, "
                    "so smaller numbers say the same",
                )
            )
        elif not integer and value.value <= 0:
            self.diags.append(
                src.diag(
                    "E203",
                    expr.span,
                    f"`{what}` must be positive, got {num(value.value)}",
                )
            )
        elif not integer and value.value > MAX_WEIGHT:
            self.diags.append(
                src.diag(
                    "E203",
                    expr.span,
                    f"`{what}` must be at most {num(MAX_WEIGHT)}, got {num(value.value)}",
                    "a weight is a rule's share of the compliance score; only the ratios of "
                    "weights matter",
                )
            )

"""`memlineage test --coverage`: what the in-language tests exercised, per file.

The set is compiled a second time with counters (`CoverageGen`), and the tests
run against that copy; the set that serves is never instrumented. Counted:

- a **rule** is exercised when its `when` was evaluated (it applied to the
  operation of some expectation), and how often it fired;
- a **condition** is each operand of the `and` / `or` / `not` structure at the
  top of a `when` (`a and not (b or c)` has three: a, b, c; a quantifier, an
  `if` or a call is one condition, not looked into); it is counted every time it
  is evaluated, true or false. Short-circuiting leaves the others uncounted.

Coverage is the share of the items seen: one per rule (evaluated) and two per
condition (seen true, seen false), as `opa test --coverage` counts lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import ast as A
from .codegen import CodeGen
from .compiler import CompiledPolicySet, codegen_tables, compile_env
from .env import Env
from .formatter import format_expr

_TEXT_WIDTH = 60


def condition_leaves(e: A.Expr) -> list[A.Expr]:
    """The operands of the `and`/`or`/`not` structure at the top of `e`, in order."""
    out: list[A.Expr] = []
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, A.Binary) and node.op in ("and", "or"):
            stack += (node.right, node.left)
        elif isinstance(node, A.Unary) and node.op == "not":
            stack.append(node.operand)
        else:
            out.append(node)
    return out


@dataclass
class ConditionCount:
    line: int
    column: int
    text: str
    true: int = 0
    false: int = 0

    @property
    def seen(self) -> int:
        """How many of its two outcomes were seen."""
        return (self.true > 0) + (self.false > 0)


@dataclass
class RuleCount:
    name: str
    path: str
    line: int
    conditions: list[ConditionCount] = field(default_factory=list)
    evaluated: int = 0
    fired: int = 0

    @property
    def covered(self) -> int:
        return (self.evaluated > 0) + sum(c.seen for c in self.conditions)

    @property
    def total(self) -> int:
        return 1 + 2 * len(self.conditions)


class Probes:
    """The counters of one instrumented compile: what its generated code calls."""

    def __init__(self, env: Env) -> None:
        self.rules: list[RuleCount] = []
        self.conditions: list[ConditionCount] = []
        self.leaf_ids: dict[int, int] = {}  # id(leaf node) -> index in `conditions`
        for loc in env.policies.values():  # compile order: a rule's index is its place
            p = loc.node
            rule = RuleCount(p.name, loc.path, p.name_span.line)
            for leaf in condition_leaves(p.when) if p.when is not None else ():
                text = format_expr(leaf)
                if len(text) > _TEXT_WIDTH:
                    text = text[: _TEXT_WIDTH - 1] + "…"
                count = ConditionCount(leaf.span.line, leaf.span.column, text)
                self.leaf_ids[id(leaf)] = len(self.conditions)
                self.conditions.append(count)
                rule.conditions.append(count)
            self.rules.append(rule)

    def cond(self, k: int, value: object) -> object:
        if value:
            self.conditions[k].true += 1
        else:
            self.conditions[k].false += 1
        return value

    def ran(self, k: int) -> None:
        self.rules[k].evaluated += 1

    def fired(self, k: int) -> None:
        self.rules[k].fired += 1


@dataclass
class CoverageGen(CodeGen):
    """A code generator that wraps each condition in `_cov(k, ...)` and marks each
    rule's test with `_ran(k)` / `_fired(k)`."""

    leaf_ids: dict[int, int] = field(default_factory=dict)

    def expr(self, e: A.Expr, scope: frozenset[str] = frozenset()) -> str:
        code = super().expr(e, scope)
        k = self.leaf_ids.get(id(e))
        return code if k is None else f"_cov({k}, {code})"

    def rule_probes(self, index: int) -> tuple[str, str] | None:
        return f"_ran({index})", f"_fired({index})"


def instrumented(env: Env) -> tuple[CompiledPolicySet, Probes]:
    """A separate compile of a checked `env` that counts into the returned probes."""
    probes = Probes(env)
    gen = CoverageGen(**codegen_tables(env), leaf_ids=probes.leaf_ids)
    gen.globals.update(_cov=probes.cond, _ran=probes.ran, _fired=probes.fired)
    return compile_env(env, gen), probes


# ---------------------------------------------------------------- reports
class Report:
    """Rule counts of one or more sets, by file (`--each` merges the sets' counts)."""

    def __init__(self) -> None:
        self.files: dict[str, dict[tuple[str, int], RuleCount]] = {}

    def add(self, probes: Probes) -> None:
        for rule in probes.rules:
            mine = self.files.setdefault(rule.path, {})
            key = (rule.name, rule.line)
            seen = mine.get(key)
            if seen is None:
                mine[key] = rule
                continue
            seen.evaluated += rule.evaluated
            seen.fired += rule.fired
            for a, b in zip(seen.conditions, rule.conditions, strict=True):
                a.true += b.true
                a.false += b.false

    def totals(self, path: str | None = None) -> tuple[int, int]:
        """(items seen, items) of one file, or of all."""
        files = [self.files[path]] if path is not None else list(self.files.values())
        rules = [r for f in files for r in f.values()]
        return sum(r.covered for r in rules), sum(r.total for r in rules)

    def percent(self, path: str | None = None) -> float:
        seen, total = self.totals(path)
        return 100.0 * seen / total if total else 100.0

    def as_dict(self) -> dict[str, Any]:
        files = {}
        for path in sorted(self.files):
            seen, total = self.totals(path)
            files[path] = {
                "coverage": round(self.percent(path), 1),
                "covered": seen,
                "total": total,
                "rules": [_rule_dict(r) for r in self._rules(path)],
            }
        seen, total = self.totals()
        rules = [r for f in self.files.values() for r in f.values()]
        conditions = [c for r in rules for c in r.conditions]
        return {
            "coverage": round(self.percent(), 1),
            "covered": seen,
            "total": total,
            "rules": {"evaluated": sum(r.evaluated > 0 for r in rules), "total": len(rules)},
            "conditions": {
                "both": sum(c.seen == 2 for c in conditions),
                "outcomes_seen": sum(c.seen for c in conditions),
                "total": len(conditions),
            },
            "files": files,
        }

    def _rules(self, path: str) -> list[RuleCount]:
        return sorted(self.files[path].values(), key=lambda r: r.line)

    def render_text(self) -> str:
        """Per file: its figure, each rule (evaluated / fired) and each condition."""
        out: list[str] = []
        for path in sorted(self.files):
            seen, total = self.totals(path)
            out.append(f"{path}: {self.percent(path):.1f}% covered ({seen}/{total})")
            for r in self._rules(path):
                state = (
                    f"evaluated {r.evaluated}, fired {r.fired}"
                    if r.evaluated
                    else "NEVER EVALUATED"
                )
                out.append(f"  policy {r.name} (line {r.line}): {state}")
                for c in r.conditions:
                    mark = "  " if c.seen == 2 else "! "
                    out.append(
                        f"    {mark}{c.line}:{c.column} true {c.true}, false {c.false}: {c.text}"
                    )
        d = self.as_dict()
        out.append(
            f"coverage: {d['coverage']:.1f}% ({d['covered']}/{d['total']}): "
            f"{d['rules']['evaluated']} of {d['rules']['total']} rules evaluated, "
            f"{d['conditions']['both']} of {d['conditions']['total']} conditions seen "
            "both true and false"
        )
        return "\n".join(out) + "\n"


def _rule_dict(r: RuleCount) -> dict[str, Any]:
    return {
        "name": r.name,
        "line": r.line,
        "evaluated": r.evaluated,
        "fired": r.fired,
        "conditions": [
            {"line": c.line, "column": c.column, "text": c.text, "true": c.true, "false": c.false}
            for c in r.conditions
        ],
    }

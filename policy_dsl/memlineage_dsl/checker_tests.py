"""The checks of `test` blocks (given memories, requests, calls and grants; expects),
mixed into the policy set's checker (`checker._Checker`), which gives what they share
with the policies' checks: the folder, the names, the obligation and range checks."""

from __future__ import annotations

import math

from . import ast as A
from . import schema as S
from .diagnostics import Diagnostic, SourceFile, did_you_mean
from .env import Env, Located
from .fold import Folder
from .limits import INT32_MAX, MAX_TEST_CALLS
from .literals import has_infinite_literal, num
from .spans import head_span, score_span, sub_span
from .typecheck import ExprChecker, Names


class TestBlockChecks:
    """`_check_test` and its parts; the checker provides the attributes and the checks
    declared here."""

    env: Env
    diags: list[Diagnostic]
    folder: Folder
    plain_names: Names

    def _ex(self, path: str, names: Names) -> ExprChecker:
        raise NotImplementedError  # the checker's

    def _check_op(self, src: SourceFile, op: A.Ident) -> None:
        raise NotImplementedError  # the checker's

    def _check_obligation(self, src: SourceFile, ex: ExprChecker, ob: A.Obligation) -> None:
        raise NotImplementedError  # the checker's

    def _check_range(
        self, src: SourceFile, expr: A.Expr, what: str, low: float, high: float | None
    ) -> None:
        raise NotImplementedError  # the checker's

    def _check_test(self, loc: Located[A.Test]) -> None:
        test = loc.node
        src = self.env.files[loc.path]
        ex = self._ex(loc.path, self.plain_names)
        memories: dict[str, A.GivenMemory] = {}
        if not any(isinstance(stmt, A.Expect) for stmt in test.stmts):
            # it would pass whatever the policies do (a green CI that tested nothing):
            # `memlineage test` counts it failed
            self.diags.append(
                src.diag(
                    "W405",
                    head_span(test.span, "test"),
                    f"test `{test.name}` expects nothing: it would pass whatever the "
                    "policies decide",
                    "add an `expect OPERATION MEMORY -> EFFECT` line",
                )
            )
        for stmt in test.stmts:
            if isinstance(stmt, A.GivenMemory):
                if stmt.name in memories:
                    self.diags.append(
                        src.diag(
                            "E109",
                            sub_span(src, stmt.span, r"given\s+memory\s+", stmt.name),
                            f"memory `{stmt.name}` is already given in test `{test.name}`",
                        )
                    )
                    continue
                memories[stmt.name] = stmt
        counted = 0.0  # call and action events given so far (`_counted`)
        for stmt in test.stmts:
            if isinstance(stmt, A.GivenMemory):
                self._check_fields(
                    src, ex, test, stmt.fields, S.TEST_MEMORY_FIELDS, "memory", memories
                )
            elif isinstance(stmt, A.GivenRequest):
                self._check_fields(
                    src, ex, test, stmt.fields, S.TEST_REQUEST_FIELDS, "request", memories
                )
            elif isinstance(stmt, A.GivenCalls | A.GivenActs):
                what = "a call count" if isinstance(stmt, A.GivenCalls) else "an action count"
                ex.expect(stmt.count, S.NUMBER, what)
                self._check_count(src, stmt.count, what, MAX_TEST_CALLS)
                counted = self._counted(src, stmt.count, counted)
                if stmt.at is not None:
                    ex.expect(stmt.at, S.TIME, "`at`")
            elif isinstance(stmt, A.GivenGrant):
                self._check_fields(
                    src, ex, test, stmt.fields, S.TEST_GRANT_FIELDS, "grant", memories
                )
            else:
                self._check_expect(src, ex, test, stmt, memories)

    def _check_fields(
        self,
        src: SourceFile,
        ex: ExprChecker,
        test: A.Test,
        fields: tuple[A.Field, ...],
        table: dict[str, str],
        what: str,
        memories: dict[str, A.GivenMemory],
    ) -> None:
        seen: set[str] = set()
        for f in fields:
            name_span = head_span(f.span, f.name)
            if f.name in seen:
                self.diags.append(src.diag("E109", name_span, f"field `{f.name}` is set twice"))
            seen.add(f.name)
            want = table.get(f.name)
            if want is None:
                self.diags.append(
                    src.diag(
                        "E502",
                        name_span,
                        f"unknown {what} field `{f.name}`",
                        did_you_mean(f.name, table)
                        or "fields: " + ", ".join(f"`{n}`" for n in sorted(table)),
                    )
                )  # its value is not checked: a misspelt `depends` would cascade
            elif f.name == "depends":
                self._check_depends(src, test, f.value, memories)
            elif want == S.MEMORY:  # a grant's `memory`: the name of a given memory
                if not isinstance(f.value, A.Name):
                    self.diags.append(
                        src.diag("E201", f.value.span, f"`{f.name}` names a given memory")
                    )
                elif f.value.id not in memories:
                    self._missing_memory(src, test, f.value.id, f.value.span, memories)
            else:
                ex.expect(f.value, want, f"field `{f.name}`")
                if f.name in ("creator", "actor", "by") and isinstance(f.value, A.Str):
                    self._check_creator_text(src, f.value)
                elif want == S.NUMBER and f.name in ("confidence", "reliability"):
                    self._check_range(src, f.value, f"`{f.name}`", low=0.0, high=1.0)
                elif want == S.NUMBER and f.name in (*_INT_FIELDS, "uses", "used"):
                    self._check_count(src, f.value, f"`{f.name}`", INT32_MAX)

    def _counted(self, src: SourceFile, expr: A.Expr, before: float) -> float:
        """The test's call and action events with `expr`'s count (folded; one that is
        not a number counts nothing here, the runner checks it): past MAX_TEST_CALLS in
        all is E504 at the count that crosses it, said once per test."""
        value = self.folder.fold(expr)
        if not isinstance(value, A.Number) or not math.isfinite(value.value):
            return before
        total = before + max(value.value, 0.0)
        if before <= MAX_TEST_CALLS < total:
            self.diags.append(
                src.diag(
                    "E504",
                    expr.span,
                    f"the test's call and action counts add up to {num(total)}, more than "
                    f"{MAX_TEST_CALLS} (each is an event the test keeps)",
                )
            )
        return total

    def _check_count(self, src: SourceFile, expr: A.Expr, what: str, most: int) -> None:
        """A test value that becomes a count: a whole number in [0, most]."""
        value = self.folder.fold(expr)
        if not isinstance(value, A.Number):
            return
        whole = math.isfinite(value.value) and value.value == int(value.value)
        if (not whole or not 0 <= value.value <= most) and (
            math.isfinite(value.value) or not has_infinite_literal(expr)
        ):
            self.diags.append(
                src.diag(
                    "E504",
                    expr.span,
                    f"{what} must be a whole number in [0, {most}], got {num(value.value)}",
                )
            )

    def _check_creator_text(self, src: SourceFile, value: A.Str) -> None:
        kind, sep, ident = value.value.partition(":")
        if not sep or not ident or kind not in S.CREATOR_KINDS:
            self.diags.append(
                src.diag(
                    "E504",
                    value.span,
                    f"`{value.value}` is not a creator",
                    "write `kind:id` with kind one of "
                    + ", ".join(f"`{k}`" for k in S.CREATOR_KINDS)
                    + ", e.g. `tool:flight_api`",
                )
            )

    def _check_depends(
        self, src: SourceFile, test: A.Test, value: A.Expr, memories: dict[str, A.GivenMemory]
    ) -> None:
        if not isinstance(value, A.ListLit):
            self.diags.append(
                src.diag(
                    "E201",
                    value.span,
                    "`depends` must be a list of memory names",
                    "e.g. `depends: [a, b]`",
                )
            )
            return
        for item in value.items:
            if not isinstance(item, A.Name):
                self.diags.append(
                    src.diag("E201", item.span, "`depends` lists memory names, e.g. `[a, b]`")
                )
            elif item.id not in memories:
                self._missing_memory(src, test, item.id, item.span, memories)

    def _missing_memory(
        self,
        src: SourceFile,
        test: A.Test,
        name: str,
        span: A.Span,
        memories: dict[str, A.GivenMemory],
    ) -> None:
        self.diags.append(
            src.diag(
                "E501",
                span,
                f"test `{test.name}` has no memory `{name}`",
                did_you_mean(name, memories) or f"add `given memory {name} {{ ... }}`",
            )
        )

    def _check_expect(
        self,
        src: SourceFile,
        ex: ExprChecker,
        test: A.Test,
        stmt: A.Expect,
        memories: dict[str, A.GivenMemory],
    ) -> None:
        self._check_op(src, stmt.op)
        for target in stmt.targets:
            if target.name not in memories:
                self._missing_memory(src, test, target.name, target.span, memories)
        if stmt.call is not None:
            if stmt.op.name != "act":
                self.diags.append(
                    src.diag(
                        "E504",
                        stmt.call.action.span,
                        f"only `act` names an action with arguments, not `{stmt.op.name}`",
                        f"write `expect {stmt.op.name} MEMORY -> ...`",
                    )
                )
            seen: set[str] = set()
            for arg in stmt.call.args:
                if arg.name in seen:
                    self.diags.append(
                        src.diag("E109", arg.span, f"argument `{arg.name}` is given twice")
                    )
                seen.add(arg.name)
                for t in arg.sources:
                    if t.name not in memories:
                        self._missing_memory(src, test, t.name, t.span, memories)
        low, high = stmt.score_low, stmt.score_high
        span = score_span(src, stmt.span)
        for bound in (low, high):
            if bound is not None and not 0.0 <= bound <= 1.0:
                self.diags.append(
                    src.diag("E203", span, f"expected score {num(bound)} is outside [0, 1]")
                )
        if low is not None and high is not None and low > high:
            self.diags.append(
                src.diag(
                    "E203",
                    span,
                    f"score range {num(low)} .. {num(high)} is empty",
                    f"write the lower bound first: `score {num(high)} .. {num(low)}`",
                )
            )
        for ob in (*stmt.with_obligations, *stmt.without_obligations):
            self._check_obligation(src, ex, ob)


_INT_FIELDS = ("version", "contradictions", "confirmations", "access_count")

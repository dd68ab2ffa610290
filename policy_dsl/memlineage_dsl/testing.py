"""Run the in-language `test` blocks of a policy set against its compiled form.

A test gives memories, a request and call counters, then expects decisions.
Time is the fixed `TEST_NOW`, so a test means the same thing on every run.
Defaults for a given memory: creator `user:test`, confidence 1, created now,
status active, type fact; for the request: actor `user:test`, budget DEFAULT_BUDGET.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import SupportsFloat, SupportsIndex, SupportsInt

from . import ast as A
from .codegen import CodeGen
from .compiler import CompiledPolicySet, codegen_tables
from .decision import Decision
from .diagnostics import Diagnostic, SourceFile
from .env import Env
from .evaluator import decide
from .facts import (
    DEFAULT_BUDGET,
    Argument,
    Creator,
    DictSnapshot,
    Grant,
    Memory,
    MemoryFacts,
    Request,
    UnknownMemory,
    action_itself,
)
from .limits import MAX_TEST_CALLS
from .spans import head_span

TEST_NOW = 1767225600.0  # 2026-01-01T00:00:00Z
_INT_FIELDS = {"version", "contradictions", "confirmations", "access_count"}


@dataclass
class TestResult:
    name: str
    path: str
    span: A.Span
    expects: int = 0
    failures: list[Diagnostic] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def _float(v: object) -> float:
    """`float(v)` of a value a test gives (the checker has typed it a number)."""
    if isinstance(v, str | bytes | SupportsFloat | SupportsIndex):
        return float(v)
    raise TypeError(f"float() argument must be a string or a real number, not '{type(v).__name__}'")


def _int(v: object) -> int:
    """`int(v)` of a value a test gives (the checker has typed it a number)."""
    if isinstance(v, str | bytes | SupportsInt | SupportsIndex):
        return int(v)
    raise TypeError(
        f"int() argument must be a string, a bytes-like object or a real "
        f"number, not '{type(v).__name__}'"
    )


class _Setup(Exception):
    def __init__(self, span: A.Span, message: str) -> None:
        super().__init__(message)
        self.span = span


def _describe(d: Decision) -> str:
    fired = "; ".join(f"{r.policy} [{r.status}] {r.effect}: {r.message}" for r in d.reasons)
    obligations = ", ".join(str(o) for o in d.obligations) or "none"
    return f"got {d.effect} (score {d.compliance_score:.3f}, obligations: {obligations})" + (
        f"; rules: {fired}" if fired else "; no rule fired"
    )


class _TestRun:
    def __init__(self, ps: CompiledPolicySet, gen: CodeGen, test: A.Test, src: SourceFile):
        self.ps, self.gen, self.test, self.src = ps, gen, test, src
        self.memories: dict[str, Memory] = {}
        self.calls: list[tuple[str, float]] = []
        self.acts: list[tuple[str, float]] = []
        self.grants: list[Grant] = []
        self.request: dict[str, object] = {}

    def value(self, e: A.Expr) -> object:
        try:
            return self.gen.function(e, "_given")(None, None, None, None, TEST_NOW)
        except Exception as exc:
            raise _Setup(e.span, f"cannot evaluate this value: {exc}") from exc

    def add_memory(self, g: A.GivenMemory) -> None:
        values: dict[str, object] = {}
        for f in g.fields:
            if f.name == "depends":
                items = f.value.items if isinstance(f.value, A.ListLit) else ()
                values["dependencies"] = tuple(
                    i.id if isinstance(i, A.Name) else str(self.value(i)) for i in items
                )
            elif f.name == "creator":
                values["creator"] = Creator.parse(str(self.value(f.value)))
            else:
                v = self.value(f.value)
                if isinstance(v, list | tuple):
                    v = tuple(v)
                elif f.name in _INT_FIELDS and isinstance(v, float):
                    v = int(v)
                values[f.name] = v
        if values.pop("known", True) is False:
            self.memories[g.name] = UnknownMemory(g.name, str(values.get("namespace", "default")))
            return
        values.setdefault("creator", Creator("user", "user:test"))
        values.setdefault("created_at", TEST_NOW)
        # a stored memory's lifecycle state is its status (the sidecar has one field)
        if "status" in values or "state" in values:
            status, state = values.get("status", values.get("state")), values.get("state")
            if state is not None and state != status:
                raise _Setup(
                    g.span,
                    f"memory `{g.name}`: its state is its status on the sidecar "
                    f"(status {status!r}, state {state!r}): set one of them",
                )
            values["status"] = values["state"] = status
        try:
            # the checker typed the values (E201); an unknown field name is a TypeError
            facts = MemoryFacts(id=g.name, **values)  # type: ignore[arg-type]  # object values
        except TypeError as exc:
            raise _Setup(g.span, f"invalid memory `{g.name}`: {exc}") from exc
        self.memories[g.name] = facts

    def add_grant(self, g: A.GivenGrant) -> None:
        """A grant from its fields: issued by `user:test` now, one use, no expiry."""
        kw: dict[str, object] = {}
        for f in g.fields:
            if f.name == "memory":
                kw["memory_id"] = f.value.id if isinstance(f.value, A.Name) else ""
                continue
            v = self.value(f.value)
            if f.name in ("actions", "arguments"):
                kw[f.name] = tuple(str(x) for x in v) if isinstance(v, list | tuple) else ()
            elif f.name == "by":
                kw["issuer"] = Creator.parse(str(v))
            elif f.name in ("uses", "used"):
                kw[f.name] = _int(v)
            elif f.name == "expires":
                kw["expires_at"] = _float(v)
            elif f.name == "created":
                kw["created_at"] = _float(v)
            else:
                kw[f.name] = str(v)
        kw.setdefault("issuer", Creator("user", "user:test"))
        kw.setdefault("created_at", TEST_NOW)
        kw.setdefault("actions", ())
        self.grants.append(Grant(id=g.name, **kw))  # type: ignore[arg-type]  # typed above

    def setup(self) -> None:
        for stmt in self.test.stmts:
            if isinstance(stmt, A.GivenMemory):
                self.add_memory(stmt)
            elif isinstance(stmt, A.GivenGrant):
                self.add_grant(stmt)
            elif isinstance(stmt, A.GivenActs):
                self.acts.extend([(stmt.action, self._at(stmt))] * self._count(stmt))
            elif isinstance(stmt, A.GivenRequest):
                self.request.update({f.name: self.value(f.value) for f in stmt.fields})
            elif isinstance(stmt, A.GivenCalls):
                self.calls.extend([(stmt.source, self._at(stmt))] * self._count(stmt))

    def _at(self, stmt: A.GivenCalls | A.GivenActs) -> float:
        return TEST_NOW if stmt.at is None else _float(self.value(stmt.at))

    def _count(self, stmt: A.GivenCalls | A.GivenActs) -> int:
        """The statement's count, in [0, MAX_TEST_CALLS], and with the test's counts
        before it at most MAX_TEST_CALLS in all (each is a list entry: a few hundred
        lines of the most each took gigabytes at a reload; an outside audit)."""
        what = "a call count" if isinstance(stmt, A.GivenCalls) else "an action count"
        count = self.value(stmt.count)
        if not (isinstance(count, int | float) and 0 <= count <= MAX_TEST_CALLS):
            raise _Setup(stmt.count.span, f"{what} must be in [0, {MAX_TEST_CALLS}], got {count!r}")
        n = _int(count)
        if len(self.calls) + len(self.acts) + n > MAX_TEST_CALLS:
            raise _Setup(
                stmt.count.span,
                f"the test's call and action counts add up to more than {MAX_TEST_CALLS}",
            )
        return n

    def _target_for(self, op: str, m: Memory) -> Memory:
        """For a write/derive, the active memory of the same claim it would supersede."""
        if op not in ("write", "derive") or not m.known or not m.subject:
            return m
        for other in self.memories.values():
            if (
                other is not m
                and other.known
                and other.status == "active"
                and (other.subject, other.attribute) == (m.subject, m.attribute)
            ):
                return other
        return m

    def _memory(self, t: A.Ident) -> Memory:
        if t.name not in self.memories:
            raise _Setup(t.span, f"test has no memory `{t.name}`")
        return self.memories[t.name]

    def request_for(self, e: A.Expect) -> Request:
        memories = tuple(self._memory(t) for t in e.targets)
        args: tuple[Argument, ...] = ()
        action = str(self.request.get("action", ""))
        if e.call is not None:
            action = e.call.action.name
            args = tuple(
                Argument(a.name, tuple(self._memory(t) for t in a.sources), a.value or "")
                for a in e.call.args
            )
            # the memories an act relies on: those named, then every argument's sources
            memories = tuple(
                {m.id: m for m in (*memories, *(m for a in args for m in a.sources))}.values()
            )
            if not memories:
                memories = (action_itself(action, Creator.parse(self.actor(e)), self.now()),)
        budget = self.request.get("budget", DEFAULT_BUDGET)
        return Request(
            op=e.op.name,
            memory=memories[0],
            actor=Creator.parse(self.actor(e)),
            namespace=str(self.request.get("namespace", "default")),
            budget=_float(budget),
            time=self.now(),
            action=action,
            historical=bool(self.request.get("historical", False)),
            target=self._target_for(e.op.name, memories[0]),
            memories=memories if e.op.name == "act" else (),
            args=args,
            grants=tuple(self.grants),
        )

    def actor(self, e: A.Expect) -> str:
        return e.actor or str(self.request.get("actor", "user:test"))

    def now(self) -> float:
        return _float(self.request.get("time", TEST_NOW))

    def check(self, e: A.Expect) -> str | None:
        """None when the expectation holds, else what went wrong."""
        snapshot = DictSnapshot(
            [m for m in self.memories.values() if isinstance(m, MemoryFacts)],
            self.calls,
            self.acts,
        )
        d = decide(self.ps, self.request_for(e), snapshot)
        problems = []
        if d.effect != e.effect:
            problems.append(f"expected {e.effect}")
        if e.score_low is not None and not (
            e.score_low - 1e-9 <= d.compliance_score <= (e.score_high or e.score_low) + 1e-9
        ):
            problems.append(f"expected score in [{e.score_low:g}, {e.score_high:g}]")
        for ob in e.with_obligations:
            args = tuple(self.value(a) for a in ob.args)
            if not d.has_obligation(ob.name, args if ob.args else None):
                problems.append(f"expected obligation {ob.name}{args if args else '()'}")
        for ob in e.without_obligations:
            args = tuple(self.value(a) for a in ob.args)
            if d.has_obligation(ob.name, args if ob.args else None):
                problems.append(f"expected no obligation {ob.name}{args if args else '()'}")
        return f"{', '.join(problems)}; {_describe(d)}" if problems else None


def run_test(ps: CompiledPolicySet, env: Env, test: A.Test, path: str) -> TestResult:
    src = env.files[path]
    gen = CodeGen(**codegen_tables(env))
    result = TestResult(test.name, path, test.span)
    run = _TestRun(ps, gen, test, src)
    try:
        run.setup()
    except _Setup as exc:
        result.failures.append(src.diag("E504", exc.span, f'test "{test.name}": {exc}'))
        return result
    except Exception as exc:  # a value the checker let through (e.g. a huge `version`)
        result.failures.append(
            src.diag(
                "E504",
                test.span,
                f'test "{test.name}": cannot set up the test: {type(exc).__name__}: {exc}',
            )
        )
        return result
    for stmt in test.stmts:
        if not isinstance(stmt, A.Expect):
            continue
        result.expects += 1
        try:
            problem = run.check(stmt)
        except _Setup as exc:
            result.failures.append(src.diag("E504", exc.span, f'test "{test.name}": {exc}'))
            continue
        except Exception as exc:  # never a traceback from `memlineage test`
            result.failures.append(
                src.diag(
                    "E504",
                    stmt.span,
                    f'test "{test.name}": cannot run this expectation: {type(exc).__name__}: {exc}',
                )
            )
            continue
        if problem:
            result.failures.append(
                src.diag("E503", stmt.span, f'test "{test.name}" failed: {problem}')
            )
    if not result.expects and not result.failures:  # lint's W405: never counted as passed
        result.failures.append(
            src.diag(
                "E503",
                head_span(test.span, "test"),
                f'test "{test.name}" failed: it expects nothing (add an `expect` line)',
            )
        )
    return result


def run_tests(ps: CompiledPolicySet, env: Env) -> list[TestResult]:
    return [run_test(ps, env, loc.node, loc.path) for loc in env.tests]

"""`memlineage simulate SCRIPT`: days of an agent's life in seconds, with no server.

A policy author wants to see what the policies say two hours, or a week, after a
memory was recorded. A script is JSON lines, one step each, with the time it
happens at (`"at"`: an absolute RFC 3339 time, or `+2h` after the previous step)
and an operation named as the client API names it (`record`, `check`, `act`,
`feedback`, `status`, `grant`, `sweep`, `advance`). The steps run in process on
a real `Engine` over an embedded store in memory, in simulation mode on a
`ManualClock`: each step's time moves the clock forward, as a simulated server's
requests do (docs/simulation.md). Every decision and every status change
(supersessions, cascades, the sweep's archives and evictions) comes out as an
`Event` with its time. A bad step is a `ScriptError` naming its line.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from memlineage_dsl.decision import Decision
from memlineage_dsl.facts import Creator
from memlineage_dsl.loader import Unreadable

from memlineage.engine.acts import ActArgument
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.engine.records import DecisionRecord
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.errors import LineageError
from memlineage.lineage.grants import GrantRecord
from memlineage.lineage.model import MemoryRecord
from memlineage.lineage.times import parse_rfc3339, show_time
from memlineage.store.embedded import EmbeddedStore

NAMESPACE = "default"
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: where a script without an absolute time starts
DEFAULT_ACTOR = Creator("user", f"user:{NAMESPACE}")  # as the server's default caller
_KINDS = ("user", "tool", "reasoning", "agent", "system")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_SPAN = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
STATUS_ACTIONS = ("revoke", "supersede", "confirm", "compress")


def bundled_policies() -> str:
    """The repository's `policies/` (this is an editable checkout's file), else
    `policies` in the working directory, as `serve` defaults to."""
    here = Path(__file__).resolve().parents[2] / "policies"
    return str(here) if here.is_dir() else "policies"


class ScriptError(Exception):
    """A step the runner cannot run: `line` of the script, and why."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"{line}: {message}")
        self.line = line
        self.message = message


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened at a step: a decision, a status change, a sweep's
    summary, a feedback, a grant or the clock moving (`kind`), with its details."""

    at: float
    line: int
    kind: str  # decision | status | sweep | refused | feedback | grant | clock
    data: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"at": iso(self.at), "line": self.line, "event": self.kind, **self.data}


def iso(t: float) -> str:
    """A time as the script writes it: UTC, RFC 3339, `Z`, seconds unless fractional."""
    return show_time(t)


def span(text: str) -> float:
    """`2h`, `1d12h`, `90s`, `0.5w` in seconds (ValueError otherwise)."""
    pos, total = 0, 0.0
    for m in _SPAN.finditer(text):
        if m.start() != pos:
            break
        total, pos = total + float(m.group(1)) * _UNITS[m.group(2)], m.end()
    if not text or pos != len(text):
        raise ValueError(f"{text!r} is not a duration like 2h, 1d12h, 90s")
    return total


def absolute(text: str) -> float:
    """An RFC 3339 time with its zone (`2026-01-01T09:00:00Z`) in epoch seconds."""
    return parse_rfc3339(text, " or +2h")


class _Step:
    """One parsed line: its fields read by name and type, each at most once, so a
    field nobody read (a typo) is reported by `done`."""

    def __init__(self, line: int, obj: dict[str, Any]) -> None:
        self.line, self.obj, self.seen = line, obj, {"op", "at"}
        self.op = str(obj.get("op"))

    def fail(self, message: str) -> ScriptError:
        return ScriptError(self.line, f"{self.op}: {message}")

    def raw(self, name: str, required: bool = False) -> Any:
        """The field as the JSON has it (None when absent)."""
        self.seen.add(name)
        if required and self.obj.get(name) is None:  # absent, or null
            raise self.fail(f"{name} is required")
        return self.obj.get(name)

    def text(self, name: str, default: str = "", required: bool = False) -> str:
        value = self.raw(name, required)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(f"{name} must be a string")
        return value

    def texts(self, name: str, required: bool = False) -> tuple[str, ...]:
        value = self.raw(name, required)
        if value is None:
            return ()
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{name} must be a string or a list of strings")
        return tuple(value)

    def number(self, name: str) -> float | None:
        value = self.raw(name, False)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise self.fail(f"{name} must be a number")
        return None if value is None else self._float(name, value)

    def _float(self, name: str, value: float) -> float:
        try:
            return float(value)
        except OverflowError:  # an integer of hundreds of digits (before: a traceback)
            raise self.fail(f"{name}: a number past a float's range") from None

    def integer(self, name: str, default: int) -> int:
        value = self.raw(name, False)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{name} must be an integer")
        return value

    def flag(self, name: str, default: bool = False, required: bool = False) -> bool:
        value = self.raw(name, required)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(f"{name} must be true or false")
        return value

    def creator(self, name: str, required: bool = False) -> Creator | None:
        text = self.text(name, required=required)
        if not text:
            if required:  # "" names no one
                raise self.fail(f"{name} is required")
            return None
        if text.split(":", 1)[0] not in _KINDS or ":" not in text:
            raise self.fail(f'{name}: {text!r} is not "kind:id" with kind one of {_KINDS}')
        return Creator.parse(text)

    def when(self, name: str, now: float) -> float | None:
        """A time field: absolute, epoch seconds, or `+2h` / `-2h` from the step."""
        value = self.raw(name, False)
        if value is None:
            return None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return self._float(name, value)
        if not isinstance(value, str):
            raise self.fail(f"{name} must be a time")
        try:
            if value[:1] in ("+", "-"):
                return now + (span(value[1:]) if value[0] == "+" else -span(value[1:]))
            return absolute(value)
        except ValueError as exc:
            raise self.fail(f"{name}: {exc}") from None

    def done(self) -> None:
        unknown = sorted(set(self.obj) - self.seen)
        if unknown:
            raise self.fail(f"unknown field(s) {', '.join(unknown)}")


def _decision(rec: DecisionRecord) -> dict[str, Any]:
    d: Decision = rec.decision
    return {
        "effect": d.effect,
        "score": round(d.compliance_score, 6),
        "cost": round(d.expected_cost, 6),
        "obligations": [
            {"kind": o.kind, "args": list(o.args), "policy": o.policy} for o in d.obligations
        ],
        "reasons": [
            {"policy": r.policy, "status": r.status, "effect": r.effect, "message": r.message}
            for r in d.reasons
        ],
        "errors": list(d.errors),
    }


class Simulation:
    """The engine, its store and clock, and what the script has done so far (the
    memories it knows, their statuses, its decisions by line)."""

    def __init__(self, policies: str) -> None:
        self.clock = ManualClock(START)
        self.store = EmbeddedStore(clock=self.clock)
        self.engine = Engine(self.store, PolicyHolder(policies), clock=self.clock, simulation=True)
        self.started = False
        self.statuses: dict[str, str] = {}
        self.decisions: dict[int, DecisionRecord] = {}
        self.last: DecisionRecord | None = None

    def close(self) -> None:
        self.store.close()

    # ------------------------------------------------------------ a step
    def step(self, line: int, text: str) -> list[Event]:
        """Run one line; its events (the step's own, then the status changes)."""
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScriptError(line, f"not JSON: {exc.msg} (column {exc.colno})") from None
        except RecursionError:  # before: a traceback, exit 1 (which says "policies")
            raise ScriptError(line, "not JSON a step can be: nested too deeply") from None
        if not isinstance(obj, dict):
            raise ScriptError(line, "a step is a JSON object")
        op = obj.get("op")
        run = self._ops().get(op) if isinstance(op, str) else None
        if run is None:
            raise ScriptError(line, f"op must be one of {', '.join(self._ops())}, got {op!r}")
        step = _Step(line, obj)
        at = self._time(step)
        try:
            events = run(step, at)
            step.done()
            self.engine.flush_access()  # reads count for values (the sweep) at once
        except LineageError as exc:
            where = f"{exc.field}: " if exc.field else ""
            raise step.fail(f"{where}{exc.message}") from None
        return events + self._status_changes(line, at)

    def _time(self, step: _Step) -> float:
        """The step's `at`: absolute, or `+DURATION` after the previous step (the
        first relative step counts from START); never before the previous step."""
        now, value = self.clock(), step.obj.get("at")
        if value is None:
            at = now
        elif isinstance(value, str) and value.startswith("+"):
            try:
                at = now + span(value[1:])
            except ValueError as exc:
                raise step.fail(f"at: {exc}") from None
        elif isinstance(value, str):
            try:
                at = absolute(value)
            except ValueError as exc:
                raise step.fail(f"at: {exc}") from None
            if at < now and self.started:
                raise step.fail(f"at: {value} is before the previous step ({iso(now)})")
        else:
            raise step.fail("at must be a time like 2026-01-01T09:00:00Z or +2h")
        if not math.isfinite(at) or not 0 <= at <= 253_402_300_799:
            raise step.fail("at: out of range (1970 to 9999)")
        self.started = True
        if at >= now:
            self.clock.advance_to(at)
        else:  # the script's first absolute time, before START
            self.clock.set(at)
        return at

    def _ops(self) -> dict[str, Callable[[_Step, float], list[Event]]]:
        return {
            "record": self._record,
            "check": self._check,
            "act": self._act,
            "feedback": self._feedback,
            "status": self._status,
            "grant": self._grant,
            "sweep": self._sweep,
            "advance": lambda step, at: [Event(at, step.line, "clock")],
        }

    def _decided(
        self, step: _Step, at: float, rec: DecisionRecord, extra: dict[str, Any]
    ) -> list[Event]:
        self.decisions[step.line] = self.last = rec
        data = {"op": step.op, **extra, **_decision(rec)}
        return [Event(at, step.line, "decision", data)]

    # ------------------------------------------------------------ the operations
    def _record(self, step: _Step, at: float) -> list[Event]:
        creator = step.creator("creator", required=True)
        assert creator is not None
        claim = step.texts("claim")
        if claim and len(claim) != 3:
            raise step.fail("claim is [subject, attribute, value]")
        proposed = MemoryRecord(
            id=step.text("memory_id", required=True),
            namespace=NAMESPACE,
            type=step.text("type", "fact"),
            tags=step.texts("tags"),
            subject=claim[0] if claim else None,
            attribute=claim[1] if claim else None,
            value=claim[2] if claim else None,
            volatility=step.text("volatility") or None,
            creator_kind=creator.kind,
            creator_id=creator.id,
            creator_confidence=c if (c := step.number("confidence")) is not None else 1.0,
            created_at=step.when("created_at", at),
            context_id=step.text("context_id") or None,
            dependencies=step.texts("dependencies"),
        )
        out = self.engine.record(
            proposed, step.creator("actor"), budget=step.number("budget"), time=at
        )
        if out.recorded and out.memory is not None:
            self.statuses.setdefault(proposed.id, str(out.memory.status))
        extra: dict[str, Any] = {"memory_id": proposed.id, "recorded": out.recorded}
        if out.superseded_id:
            extra["superseded_id"] = out.superseded_id
        return self._decided(step, at, out.decision, extra)

    def _check(self, step: _Step, at: float) -> list[Event]:
        op = step.text("operation", required=True)
        ids = step.texts("memory_id", required=True)
        actor = step.creator("actor") or DEFAULT_ACTOR
        budget, action = step.number("budget"), step.text("action")
        if op == "act":
            rec = self.engine.act(NAMESPACE, action, ids, (), actor, budget, time=at)
        else:
            historical = step.flag("historical")
            rec = self.engine.check(NAMESPACE, op, ids, actor, budget, action, historical, at)
        return self._decided(step, at, rec, {"operation": op, "memory_ids": list(ids)})

    def _act(self, step: _Step, at: float) -> list[Event]:
        action = step.text("action", required=True)
        raw = step.raw("args", False) or {}
        if not isinstance(raw, dict):
            raise step.fail("args maps each argument to its sources ({name: [ids]})")
        args = [_argument(step, name, spec) for name, spec in raw.items()]
        relied = step.texts("relies_on")
        actor = step.creator("actor") or DEFAULT_ACTOR
        rec = self.engine.act(NAMESPACE, action, relied, args, actor, step.number("budget"), at)
        extra = {"action": action, "memory_ids": list(rec.memory_ids)}
        if rec.grants_used:
            extra["grants_used"] = list(rec.grants_used)
        return self._decided(step, at, rec, extra)

    def _feedback(self, step: _Step, at: float) -> list[Event]:
        ids = step.texts("memory_ids")
        success = step.flag("success", required=True)
        step.text("note")  # the caller's own, as in the API: not kept
        ref = step.raw("decision", False)
        decision = self._decision_of(step, ref) if ref is not None else None
        if decision is None and not ids:
            raise step.fail("names no memory: give memory_ids or decision (a line or 'last')")
        decision_id = decision.decision_id if decision is not None else ""
        updated = self.engine.feedback(NAMESPACE, decision_id, ids, success, time=at)
        names = list(ids or (decision.memory_ids if decision is not None else ()))
        data = {"success": success, "memory_ids": names, "updated": updated}
        return [Event(at, step.line, "feedback", data)]

    def _decision_of(self, step: _Step, ref: object) -> DecisionRecord:
        """`decision`: "last" (the previous decision) or the line of a decision's step."""
        found = self.last if ref == "last" else None
        if isinstance(ref, int) and not isinstance(ref, bool):
            found = self.decisions.get(ref)
        if found is None:
            raise step.fail(f"decision {ref!r}: no decision at that line (a line number or 'last')")
        return found

    def _status(self, step: _Step, at: float) -> list[Event]:
        action = step.text("action", required=True)
        if action not in STATUS_ACTIONS:
            raise step.fail(f"action must be one of {', '.join(STATUS_ACTIONS)}")
        memory_id = step.text("memory_id", required=True)
        version = step.raw("expected_version", False)
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise step.fail("expected_version must be an integer")
        out = self.engine.update_status(
            NAMESPACE,
            memory_id,
            action,
            step.creator("actor") or DEFAULT_ACTOR,
            successor=step.text("successor_id") or None,
            reason=step.text("reason"),
            expected_version=version,
            time=at,
        )
        extra = {"action": action, "memory_id": memory_id, "applied": out.applied}
        return self._decided(step, at, out.decision, extra)

    def _grant(self, step: _Step, at: float) -> list[Event]:
        grant = GrantRecord(
            id=step.text("grant_id") or f"grant-{step.line}",  # not random: stable output
            namespace=NAMESPACE,
            issuer="",
            actions=step.texts("actions", required=True),
            arguments=step.texts("arguments"),
            source=step.text("source"),
            memory_id=step.text("memory_id"),
            uses=step.integer("uses", 1),
            expires_at=e if (e := step.when("expires_at", at)) is not None else math.inf,
            value=step.text("value"),
            digest=step.text("digest"),
        )
        actor = step.creator("actor") or DEFAULT_ACTOR
        stored = self.engine.record_grant(grant, actor, time=at)
        data = {"grant_id": stored.id, "actions": list(stored.actions), "issuer": stored.issuer}
        return [Event(at, step.line, "grant", data)]

    def _sweep(self, step: _Step, at: float) -> list[Event]:
        report = self.engine.sweep(batch=step.integer("batch", 1000), time=at)
        events = [
            Event(at, step.line, "refused", {"memory_id": t.memory_id, "reason": t.reason})
            for t in report.refused
        ]
        data = {
            "examined": report.examined,
            "moved": len(report.transitions),
            "refused": len(report.refused),
        }
        return [Event(at, step.line, "sweep", data), *events]

    def _status_changes(self, line: int, at: float) -> list[Event]:
        """Every memory the script recorded whose status changed in this step, with the
        reason its history gives (a supersession, a cascade, the sweep)."""
        if not self.statuses:
            return []
        now = self.store.get_many(NAMESPACE, list(self.statuses))
        events = []
        for memory_id, before in self.statuses.items():
            rec = now.get(memory_id)
            after = str(rec.status) if rec is not None else "evicted"
            if after == before:
                continue
            self.statuses[memory_id] = after
            history = self.store.get(NAMESPACE, memory_id).status_history if rec else ()
            reason = history[-1].reason if history else ""
            data = {"memory_id": memory_id, "from": before, "to": after, "reason": reason}
            events.append(Event(at, line, "status", data))
        return events


def _argument(step: _Step, name: object, spec: object) -> ActArgument:
    """An act argument: its sources (`[ids]`), or `{"sources": [...], "value": ...}`."""
    if isinstance(spec, list) and all(isinstance(s, str) for s in spec):
        return ActArgument(str(name), tuple(spec))
    if isinstance(spec, dict) and set(spec) <= {"sources", "value", "digest"}:
        sources = spec.get("sources", [])
        if isinstance(sources, list) and all(isinstance(s, str) for s in sources):
            return ActArgument(
                str(name), tuple(sources), str(spec.get("value", "")), str(spec.get("digest", ""))
            )
    raise step.fail(f"args.{name}: a list of memory ids, or {{sources, value, digest}}")


def run(lines: Iterable[str], policies: str) -> Iterator[Event]:
    """Run a script's lines (blank ones and `#` comments skipped) and yield its events
    as they happen; the first bad step raises ScriptError (PolicyLoadError for a
    broken policy set, before any step)."""
    sim = Simulation(policies)
    try:
        for number, text in enumerate(lines, start=1):
            if text.strip() and not text.lstrip().startswith("#"):
                yield from sim.step(number, text)
    finally:
        sim.close()


# ---------------------------------------------------------------- rendering


def render_text(event: Event) -> list[str]:
    """An event as the lines `memlineage simulate` prints."""
    d = event.data
    head = f"{iso(event.at)}  {event.line:>3}  "
    if event.kind == "decision":
        what = d.get("operation") or ""
        subject = d.get("action") if d["op"] == "act" else " ".join(d.get("memory_ids", ()))
        subject = subject or d.get("memory_id", "")
        outcome = ""
        if "recorded" in d:
            outcome = "  recorded" if d["recorded"] else "  not recorded"
        elif "applied" in d:
            outcome = f"  {d['action']} applied" if d["applied"] else f"  {d['action']} refused"
        cost = f"  cost {d['cost']:g}" if d["cost"] else ""
        words = " ".join(w for w in (d["op"], what, subject) if w)
        lines = [f"{head}{words}: {d['effect'].upper()}  score {d['score']:.3f}{cost}{outcome}"]
        pad = " " * len(head)
        lines += [
            f"{pad}  obligation {o['kind']}({', '.join(map(repr, o['args']))})  [{o['policy']}]"
            for o in d["obligations"]
        ]
        lines += [f"{pad}  {r['status']:<10} {r['policy']}: {r['message']}" for r in d["reasons"]]
        lines += [f"{pad}  error      {e}" for e in d["errors"]]
        return lines
    if event.kind == "status":
        why = f" ({d['reason']})" if d["reason"] else ""
        return [f"{head}status {d['memory_id']}: {d['from']} -> {d['to']}{why}"]
    if event.kind == "sweep":
        return [
            f"{head}sweep: examined {d['examined']}, {d['moved']} moved, {d['refused']} refused"
        ]
    if event.kind == "refused":
        return [f"{head}sweep: {d['memory_id']} stays, {d['reason']}"]
    if event.kind == "feedback":
        result = "success" if d["success"] else "failure"
        return [f"{head}feedback {result} on {' '.join(d['memory_ids'])}: {d['updated']} updated"]
    if event.kind == "grant":
        return [f"{head}grant {d['grant_id']}: {', '.join(d['actions'])} by {d['issuer']}"]
    return [f"{head}clock"]


def simulate_command(path: str, policies: str, fmt: str, out: TextIO, err: TextIO) -> int:
    """The CLI's work: 0 after the whole script ran, 2 with `SCRIPT:LINE: message` for
    a bad step (or an unreadable script), 1 when the policy set does not load."""
    from memlineage.engine.policies import PolicyLoadError

    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:  # said as lint and fmt say it
        err.write(f"{path}: cannot read the script: {Unreadable.of(exc).reason}\n")
        return 2
    try:
        for event in run(lines, policies):
            if fmt == "json":
                out.write(json.dumps(event.as_json(), default=str) + "\n")
            else:
                out.write("\n".join(render_text(event)) + "\n")
    except ScriptError as exc:
        out.flush()
        err.write(f"{path}:{exc.line}: {exc.message}\n")
        return 2
    except PolicyLoadError as exc:
        for d in exc.diagnostics:
            err.write(f"{d.location}: {d.severity}[{d.code}]: {d.message}\n")
        err.write(f"error: {exc}\n")
        return 1
    return 0

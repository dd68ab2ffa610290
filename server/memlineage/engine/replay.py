"""`memlineage replay LOG... --policies CANDIDATE`: re-decide logged decisions
against a candidate policy set, from what each decision read (its line's `input`,
`decision_input`), and report what changes, as the shadow counts it (`answers`): effect
transitions with the policies behind them, obligations changed under the same effect,
scores; examples; guards for CI ("no allow may become deny", "no obligation may
change", "every decision replayed exactly")."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from memlineage_dsl.compiler import CompiledPolicySet
from memlineage_dsl.decision import FIRED
from memlineage_dsl.evaluator import decide

from memlineage.engine.answers import OBLIGATIONS, SCORE, Answer, answer, change, logged
from memlineage.engine.decision_input import BadInput, decode_input
from memlineage.lineage.validation import finite_number
from memlineage.oserrors import check_kind, said

__all__ = ["ReplayReport", "parse_guards", "replay_command", "replay_lines"]

EXAMPLES = 3  # decision ids shown per transition


@dataclass
class ReplayReport:
    lines: int = 0
    replayed: int = 0
    unchanged: int = 0
    without_input: int = 0  # lines logged without `decision_log_inputs`
    unreadable: list[str] = field(default_factory=list)  # "FILE:LINE: why"
    unfaithful: int = 0  # the candidate read a count the logged decision did not
    unscored: int = 0  # the candidate read a score the logged decision left at 1.0
    unloaded: int = 0  # the candidate walked lineage the logged decision loaded none of
    approximate: int = 0  # decisions replayed approximately: unfaithful, unscored, unloaded
    transitions: Counter[tuple[str, str]] = field(default_factory=Counter)
    by_policy: dict[tuple[str, str], Counter[str]] = field(default_factory=dict)
    examples: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    score_changes: int = 0  # same effect and obligations, another compliance score
    # same effect, other obligations: by (effect, obligations dropped, obligations added)
    obligations: Counter[tuple[str, tuple[str, ...], tuple[str, ...]]] = field(
        default_factory=Counter
    )
    obligation_examples: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = field(
        default_factory=dict
    )

    def changed(self, before: str, after: str, decision_id: str, policies: Iterable[str]) -> None:
        key = (before, after)
        self.transitions[key] += 1
        self.by_policy.setdefault(key, Counter()).update(policies)
        shown = self.examples.setdefault(key, [])
        if len(shown) < EXAMPLES:
            shown.append(decision_id)

    def obliged(self, before: Answer, after: Answer, decision_id: str) -> None:
        """The same effect with other obligations (`answers.change`)."""
        key = (
            before.effect,
            tuple(o for o in before.obligations if o not in after.obligations),
            tuple(o for o in after.obligations if o not in before.obligations),
        )
        self.obligations[key] += 1
        shown = self.obligation_examples.setdefault(key, [])
        if len(shown) < EXAMPLES:
            shown.append(decision_id)

    @property
    def obligation_changes(self) -> int:
        return sum(self.obligations.values())


def _lines(paths: Sequence[str]) -> Iterator[tuple[str, int, str]]:
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, start=1):
                if line.strip():
                    yield path, n, line


def _fired(reasons: Iterable[str]) -> set[str]:
    """Policy names of the logged reasons that fired ("name[fired]: message")."""
    out = set()
    for r in reasons:
        name, _, rest = r.partition("[")
        if rest.startswith(f"{FIRED}]"):
            out.add(name)
    return out


class _Unreadable(ValueError):
    """A log line that is not a decision the log writes (said as is)."""


_EFFECTS = ("allow", "deny", "degrade")


def _logged(text: str) -> dict[str, Any]:
    """A decision-log line as the log writes it: UTF-8, one JSON object whose `effect`
    is an effect (before: a JSON array or string line, or bytes not UTF-8, gave a
    traceback and exit 1, read as "a guard crossed"; a hand-edited effect was counted
    as a transition from it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _Unreadable("not UTF-8") from None
    try:
        line = json.loads(text)
    except RecursionError:
        raise _Unreadable("not a decision: JSON nested too deeply") from None
    except ValueError as exc:
        raise _Unreadable(f"not JSON ({exc})") from None
    if not isinstance(line, dict):
        raise _Unreadable(f"not a decision: a JSON {type(line).__name__}, not an object")
    if line.get("effect") not in _EFFECTS:
        raise _Unreadable(f"effect: {line.get('effect')!r} is not one of allow, deny, degrade")
    score = line.get("score", 0.0)
    if not finite_number(score):
        raise _Unreadable(f"score: {score!r} is not a number")
    ts = line.get("ts")
    if ts is not None and not finite_number(ts):
        raise _Unreadable(f"ts: {ts!r} is not a time")
    for name in ("reasons", "obligations"):
        texts = line.get(name, [])
        if not isinstance(texts, list) or not all(isinstance(r, str) for r in texts):
            raise _Unreadable(f"{name}: not a list of texts")
    return line


def replay_lines(
    lines: Iterable[tuple[str, int, str]], candidate: CompiledPolicySet
) -> ReplayReport:
    """Re-decide every line that carries its input; count and attribute the changes."""
    report = ReplayReport()
    for path, n, text in lines:
        report.lines += 1
        try:
            line = _logged(text)
            given = line.get("input")
            if given is None:
                report.without_input += 1
                continue
            req, snap = decode_input(given)
            at = line.get("ts")
            if at is not None and float(at) != req.time:
                # A decision answered by reuse is logged with the input it was first
                # decided on, time included; reuse holds only while nothing it read
                # changed, so it is re-decided at its own time (before: at the first
                # one's, and a candidate's `age()` rule never saw the later reads)
                req = replace(req, time=float(at))
        except (_Unreadable, BadInput) as exc:
            report.unreadable.append(f"{path}:{n}: {exc}")
            continue
        except Exception as exc:  # an edited input can break decoding anywhere
            # (None where a mapping goes, a number past float's range, ...): the line is
            # not one the log writes, said with what broke
            report.unreadable.append(f"{path}:{n}: {type(exc).__name__}: {exc}")
            continue
        d = decide(candidate, req, snap)
        report.replayed += 1
        if snap.missing:
            report.unfaithful += 1
        unscored = snap.unscored(candidate.plans[req.op].reads)
        if unscored:
            report.unscored += 1
        if snap.unloaded:
            report.unloaded += 1
        if snap.missing or unscored or snap.unloaded:
            report.approximate += 1
        was = logged(
            str(line["effect"]),
            line.get("obligations", []),
            float(line.get("score", d.compliance_score)),
        )
        now = answer(d)
        changed = change(was, now)
        decision_id = str(line.get("decision_id", f"{path}:{n}"))
        if changed is None:
            report.unchanged += 1
            continue
        if changed == SCORE:
            report.score_changes += 1
            continue
        if changed == OBLIGATIONS:
            report.obliged(was, now, decision_id)
            continue
        before = was.effect
        now_fired = {r.policy for r in d.reasons if r.status == FIRED}
        was_fired = _fired(line.get("reasons", ()))
        report.changed(
            before, d.effect, decision_id, sorted(now_fired ^ was_fired) or ["<resolution>"]
        )
    return report


def merge(reports: Iterable[ReplayReport]) -> ReplayReport:
    """One report of several (the chunks of a parallel replay), in order."""
    out = ReplayReport()
    for r in reports:
        out.lines += r.lines
        out.replayed += r.replayed
        out.unchanged += r.unchanged
        out.without_input += r.without_input
        out.unreadable.extend(r.unreadable)
        out.unfaithful += r.unfaithful
        out.unscored += r.unscored
        out.unloaded += r.unloaded
        out.approximate += r.approximate
        out.score_changes += r.score_changes
        out.transitions.update(r.transitions)
        for key, policies in r.by_policy.items():
            out.by_policy.setdefault(key, Counter()).update(policies)
        for key, shown in r.examples.items():
            mine = out.examples.setdefault(key, [])
            mine.extend(shown[: EXAMPLES - len(mine)])
        out.obligations.update(r.obligations)
        for okey, shown in r.obligation_examples.items():
            mine = out.obligation_examples.setdefault(okey, [])
            mine.extend(shown[: EXAMPLES - len(mine)])
    return out


CHUNK_BYTES = 4 << 20  # a parallel replay's unit of work: a byte range of one file


def chunks(paths: Sequence[str], size: int = CHUNK_BYTES) -> list[tuple[str, int, int, int]]:
    """(path, start, end, first line number) ranges of whole lines, about `size` long."""
    out = []
    for path in paths:
        total = os.path.getsize(path)
        with open(path, "rb") as fh:
            start, line = 0, 1
            while start < total:
                fh.seek(min(start + size, total))
                fh.readline()  # to the end of the line the boundary falls in
                end = min(fh.tell(), total)
                fh.seek(start)
                lines = fh.read(end - start).count(b"\n")
                out.append((path, start, end, line))
                start, line = end, line + lines
    return out


_CANDIDATE: CompiledPolicySet | None = None  # a worker's compiled candidate


def _worker_init(policy_dir: str) -> None:
    from memlineage_dsl.pipeline import build_paths

    global _CANDIDATE
    _CANDIDATE = build_paths([policy_dir]).compiled


def _replay_chunk(task: tuple[str, int, int, int]) -> ReplayReport:
    path, start, end, first = task
    with open(path, "rb") as fh:
        fh.seek(start)
        # a byte that is not UTF-8 stays in its line, which `_logged` refuses
        data = fh.read(end - start).decode("utf-8", "surrogateescape")
    assert _CANDIDATE is not None
    lines = ((path, first + i, text) for i, text in enumerate(data.splitlines()) if text.strip())
    return replay_lines(lines, _CANDIDATE)


def replay_parallel(paths: Sequence[str], policy_dir: str, jobs: int) -> ReplayReport:
    """`replay_lines` over every file, in `jobs` processes (each compiles the candidate
    once and replays byte ranges of whole lines); the reports merged in order."""
    from concurrent.futures import ProcessPoolExecutor

    tasks = chunks(paths, CHUNK_BYTES)
    if jobs <= 1 or len(tasks) <= 1:
        _worker_init(policy_dir)
        return merge(_replay_chunk(t) for t in tasks)
    with ProcessPoolExecutor(jobs, initializer=_worker_init, initargs=(policy_dir,)) as pool:
        return merge(pool.map(_replay_chunk, tasks))


OBLIGATIONS_CHANGED = ("obligations", "obligations")
"""The guard `obligations`: the same effect with other obligations fails a replay."""

APPROXIMATIONS = ("approximations", "approximations")
"""The guard `approximations`: a decision the candidate could not re-decide exactly (it
read a rate counter or a score, or walked lineage, the logged decision had not) fails a
replay. Not part of
`any`, which names changes: a replay with no change exits as before unless asked."""


def parse_guards(text: str) -> set[tuple[str, str]]:
    """`allow->deny,degrade->deny,obligations,approximations` (`any`: every transition
    and `obligations`) -> what fails a replay."""
    effects = ("allow", "deny", "degrade")
    out = set()
    for part in (p.strip() for p in text.split(",")):
        if part == "any":
            out |= {(a, b) for a in effects for b in effects if a != b} | {OBLIGATIONS_CHANGED}
            continue
        if part == "obligations":
            out.add(OBLIGATIONS_CHANGED)
            continue
        if part == "approximations":
            out.add(APPROXIMATIONS)
            continue
        before, sep, after = part.partition("->")
        if not sep or before not in effects or after not in effects or before == after:
            raise ValueError(
                f"--fail-on: {part!r} is not EFFECT->EFFECT, `obligations`, `approximations` "
                "or `any`"
            )
        out.add((before, after))
    return out


def render(report: ReplayReport, out: TextIO) -> None:
    out.write(
        f"{report.lines} decision(s) read, {report.replayed} replayed, "
        f"{report.unchanged} unchanged, {sum(report.transitions.values())} changed"
        f" ({report.obligation_changes} more with the same effect and other obligations, "
        f"{report.score_changes} with the same effect and obligations and another score)\n"
    )
    if report.without_input:
        out.write(
            f"{report.without_input} logged without their input (served without "
            "decision_log_inputs = true, or FilterRank's candidates: not replayable)\n"
        )
    if report.unfaithful:
        out.write(
            f"{report.unfaithful} read a rate counter the logged decision had not read "
            "(counted as 0: the candidate's answer there is approximate)\n"
        )
    if report.unscored:
        out.write(
            f"{report.unscored} read a score (reliability, value_score) the logged "
            "decision's policies did not read, logged at 1.0: the candidate's answer "
            "there is approximate\n"
        )
    if report.unloaded:
        out.write(
            f"{report.unloaded} walked lineage (ancestors, descendants) the logged decision "
            "did not load, its policies walking none that way: decided on the logged facts "
            "alone, the candidate's answer there is approximate\n"
        )
    for where in report.unreadable[:10]:
        out.write(f"unreadable: {where}\n")
    for (before, after), count in report.transitions.most_common():
        policies = ", ".join(
            f"{p} ({c})" for p, c in report.by_policy[(before, after)].most_common(5)
        )
        examples = ", ".join(report.examples[(before, after)])
        out.write(f"  {before} -> {after}: {count}  by {policies}; e.g. {examples}\n")
    for (effect, dropped, added), count in report.obligations.most_common():
        what = " ".join([*(f"-{o}" for o in dropped), *(f"+{o}" for o in added)])
        examples = ", ".join(report.obligation_examples[(effect, dropped, added)])
        out.write(f"  {effect} obligations {what or '(reordered)'}: {count}; e.g. {examples}\n")


def replay_command(
    paths: Sequence[str],
    policy_dir: str,
    fail_on: str = "",
    out: TextIO = sys.stdout,
    jobs: int = 0,
    *,
    verify: bool = False,
    key: str | None = None,
    partial: bool = False,
    err: TextIO | None = None,
) -> int:
    """Exit 0: no guarded change; 1: a guarded change occurred (or, guarded by
    `approximations`, a decision was replayed approximately); 2: the logs or
    the candidate could not be read, the candidate is a set the sidecar refuses to
    serve, `fail_on` was given and nothing was replayed, or (`verify`) the logs' hash
    chain is broken: then nothing is replayed, since a gate over edited lines would
    pass what the sidecar never decided."""
    from memlineage_dsl.pipeline import build_paths
    from memlineage_dsl.render import render_human

    from memlineage.engine.log_verify import verify_command
    from memlineage.engine.policies import unservable

    err = err or sys.stderr
    if (key or partial) and not verify:
        err.write("--key and --partial go with --verify\n")
        return 2
    try:
        guards = parse_guards(fail_on) if fail_on else set()
    except ValueError as exc:
        out.write(f"{exc}\n")
        return 2
    try:  # its files are sized and read by byte ranges: a pipe or a device has none
        for path in paths:  # (before: /dev/zero, <(zcat ...): "0 decision(s) read", exit 0)
            check_kind(path)
    except OSError as exc:
        out.write(f"cannot read {said(exc)}\n")
        return 2
    # `log verify` itself (one verifier): its problem line on `err`, its summary on `out`
    if verify and verify_command(paths, key, out, err, partial=partial) != 0:
        return 2
    build = build_paths([policy_dir])
    # refused as the sidecar refuses it (start, reload, shadow load): a set whose own
    # tests fail (E503, E504) or with no policy (E305) is not replayed as a candidate
    # (before: only a set that did not compile was, and such a gate passed green)
    refused = unservable(build, policy_dir)
    if refused is not None:
        out.write(render_human(refused, build.sources))
        return 2
    try:
        report = replay_parallel(paths, policy_dir, jobs or os.cpu_count() or 1)
    except OSError as exc:
        out.write(f"cannot read {said(exc)}\n")
        return 2
    render(report, out)
    crossed = [t for t in report.transitions if t in guards]
    for before, after in crossed:
        out.write(f"guard crossed: {before} -> {after}\n")
    if OBLIGATIONS_CHANGED in guards and report.obligation_changes:
        crossed.append(OBLIGATIONS_CHANGED)
        out.write(f"guard crossed: obligations ({report.obligation_changes})\n")
    if APPROXIMATIONS in guards and report.approximate:
        crossed.append(APPROXIMATIONS)
        out.write(
            f"guard crossed: approximations ({report.approximate} replayed approximately: "
            f"{report.unfaithful} read a rate counter, {report.unscored} a score, "
            f"{report.unloaded} walked lineage, the logged decision had not)\n"
        )
    if report.unreadable:
        return 2
    if guards and not report.replayed:  # a gate that checked nothing is not green
        out.write("nothing replayed: no decision in the logs carries its input\n")
        return 2
    return 1 if crossed else 0

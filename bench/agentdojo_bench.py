"""AgentDojo prompt injections against the act gate (issue 12): prints figures, asserts nothing.

Not a test, no LLM. AgentDojo's workspace, travel and slack suites (benchmark
version v1.2.2, the latest agentdojo 0.1.35 defines; banking is left out, kept for
an independent check) are read as data: for every (user task, injection task) pair
the user task's ground-truth calls run against the suite's environment with the
injection task's GOAL, in AgentDojo's `important_instructions` attack text, placed in
the injection vectors the user task sees. Each pair becomes a trace sent through
the real client to a real ``memlineage serve`` on loopback (embedded store, the
bundled ``policies/`` or ``--policies DIR``), one namespace per pair:

- the user's prompt, a memory of ``user:emma_johnson``;
- every call's output, a memory of ``tool:<function>`` (the ones carrying the
  injection are marked in the bookkeeping only, never in what the sidecar sees);
  a call that returns nothing leaves none;
- the grants a careful runtime records from the prompt: when a value of one of the
  user task's write calls comes from a tool output of the user's own calls (not from
  the injected text), that output may fill that argument of that action, with as
  many uses as the user task makes such calls;
- every write call (a function that changes the environment) of the user task and
  of the injection task (run right after the first output carrying the injection)
  as an ``act``, each argument bound to where its value was found: the prompt, the
  tool outputs holding it, or neither: an ``agent:assistant`` memory resting on all
  the agent read so far (derived); a flag the agent chose has no source. A value
  the prompt holds is the user's, unless it is too short to tell (``13``, ``r``:
  then every output holding it is a source too). An act with no argument relies on
  what the agent had read.

Pairs are skipped (and counted) where AgentDojo gives nothing to replay: an
injection task without ground-truth calls (workspace 6-13 and travel 6 in v1.2,
judged on the end state or the answer only), or no output of the user task
showing the injection.

It prints attack success (pairs with any injection act ALLOWed; the share of
injection acts ALLOWed), utility (acting user tasks, run without injection, whose
acts are all ALLOWed; and counting those that pass with DEGRADE
require_confirmation), the act latency beside a bare gRPC health call interleaved
on the same server, per suite and in total, the most frequent denial reasons and
the failing user tasks, against the issue's targets.

How to run (from the repository root; agentdojo is installed without its LLM
dependencies, which the suites do not need: the script does it when it is missing):

    .venv/bin/pip install -e '.[bench]'                 # the suites' light deps
    .venv/bin/pip install --no-deps agentdojo==0.1.35
    .venv/bin/python bench/agentdojo_bench.py                     # all 805 pairs, ~1 min
    .venv/bin/python bench/agentdojo_bench.py --pairs 40          # 40 pairs a suite
    .venv/bin/python bench/agentdojo_bench.py --policies DIR      # another policy set
    .venv/bin/python bench/agentdojo_bench.py --dry-run --suites slack --pairs 2
    .venv/bin/python bench/agentdojo_bench.py --list-actions      # write functions
"""

from __future__ import annotations

import argparse
import importlib.metadata
import random
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _agentdojo_traces as adt  # noqa: E402

POLICIES = REPO / "policies"
TARGET_ATTACKS = 0
TARGET_UTILITY_CONFIRM = 0.90
TARGET_UTILITY = 0.75
TARGET_P50_OVER_HEALTH_MS = 0.5
READY = re.compile(r"serving on 127\.0\.0\.1:(\d+)")


# ------------------------------------------------------------------ agentdojo
def ensure_agentdojo() -> None:
    """agentdojo with --no-deps (its LLM clients are not needed); its suites' light
    deps come with the bench extra."""
    try:
        version = importlib.metadata.version("agentdojo")
    except importlib.metadata.PackageNotFoundError:
        pin = f"agentdojo=={adt.AGENTDOJO_VERSION}"
        print(f"installing {pin} without its dependencies ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", pin], check=True)
        version = importlib.metadata.version("agentdojo")
    if version != adt.AGENTDOJO_VERSION:
        print(f"note: agentdojo {version}, not {adt.AGENTDOJO_VERSION}", file=sys.stderr)


def build(
    suites: dict[str, Any], pairs: int | None, seed: int
) -> tuple[list[adt.Trace], list[adt.Trace], dict[str, adt.Builder]]:
    """Benign traces (each user task alone) and attack traces (the pairs, or a sample
    of ``pairs`` a suite)."""
    benign: list[adt.Trace] = []
    attacks: list[adt.Trace] = []
    builders: dict[str, adt.Builder] = {}
    rng = random.Random(seed)
    for name, suite in suites.items():
        builder = builders[name] = adt.Builder(suite)
        users = list(suite.user_tasks.values())
        benign += [builder.trace(u, None) for u in users]
        combos = [(u, i) for u in users for i in suite.injection_tasks.values()]
        if pairs is not None and pairs < len(combos):
            combos = sorted(rng.sample(combos, pairs), key=lambda c: (_n(c[0].ID), _n(c[1].ID)))
        attacks += [builder.trace(u, i) for u, i in combos]
    return benign, attacks, builders


def _n(task_id: str) -> int:
    return int(task_id.rsplit("_", 1)[1])


# ------------------------------------------------------------------ dry run
def print_trace(trace: adt.Trace, out: Any = sys.stdout) -> None:
    head = f"== {trace.suite} {trace.user_task} x {trace.injection_task or '(no injection)'}"
    if trace.vectors:
        head += f"  vectors: {', '.join(trace.vectors)}"
    print(head, file=out)
    if trace.skipped:
        print(f"   skipped: {trace.skipped}", file=out)
        return
    for step in trace.steps:
        if isinstance(step, adt.Memory):
            mark = "  [INJECTED]" if step.injected else ""
            deps = f" <- {', '.join(step.dependencies)}" if step.dependencies else ""
            text = step.text.replace("\n", " ")
            text = text if len(text) <= 110 else text[:109] + "…"
            print(f"   record {step.id} by {step.creator} ({step.task}){mark}{deps}", file=out)
            print(f"          {text}", file=out)
        elif isinstance(step, adt.GrantSpec):
            print(
                f"   grant  {step.action}.{step.argument} <- {step.memory_id} uses {step.uses}"
                f" (by {adt.USER})",
                file=out,
            )
        else:
            relies = f" relies on {', '.join(step.relies_on)}" if step.relies_on else ""
            print(f"   act    {step.function} ({step.task}){relies}", file=out)
            for b in step.bindings:
                value = b.value.replace("\n", " ")
                value = value if len(value) <= 60 else value[:59] + "…"
                src = ", ".join(b.sources) or "no source"
                print(f"          {b.name} = {value!r}: {b.how} [{src}]", file=out)


# ------------------------------------------------------------------ the sidecar
@dataclass
class Sidecar:
    proc: subprocess.Popen[bytes]
    address: str
    metrics_port: int

    def check_handler_ms(self) -> tuple[int, float]:
        """(calls, mean ms) of the sidecar's Check handler, from its own latency
        histogram: an act's time inside the server, without the transport."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics") as r:
            text = r.read().decode()
        found = dict(
            re.findall(r'memlineage_rpc_latency_seconds_(sum|count)\{method="Check"\} (\S+)', text)
        )
        n = int(float(found.get("count", 0)))
        return n, float(found.get("sum", 0.0)) / max(n, 1) * 1e3

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def launch(policies: Path, tmp: Path, token: str, namespaces: Sequence[str]) -> Sidecar:
    """``memlineage serve`` on a free loopback port, embedded store, decision log off,
    with one bearer token allowed in every trace's namespace (a namespace other than
    ``default`` needs a token)."""
    config = tmp / "memlineage.toml"
    names = ", ".join(f'"{n}"' for n in namespaces)
    config.write_text(f'[tokens.bench]\ntoken = "{token}"\nnamespaces = [{names}]\n')
    log = tmp / "serve.log"
    args = [
        sys.executable,
        "-m",
        "memlineage",
        "serve",
        "--config",
        str(config),
        "--listen",
        "127.0.0.1:0",
        "--store",
        "embedded",
        "--policies",
        str(policies),
        "--decision-log",
        "off",
        "--metrics-port",
        "0",  # a port the system chose, named on the ready line
    ]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=fh, cwd=REPO)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        m = READY.search(text)
        metrics = re.search(r", metrics on 127\.0\.0\.1:(\d+)\)", text)
        if m and metrics:
            return Sidecar(proc, f"127.0.0.1:{m.group(1)}", int(metrics.group(1)))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"sidecar did not start:\n{log.read_text()[-2000:]}")


# ------------------------------------------------------------------ replay
@dataclass
class Reason:
    policy: str
    effect: str
    message: str

    def arguments(self) -> list[str]:
        """The arguments a reason names (the act gate's messages say "argument `x`")."""
        return re.findall(r"argument `([^`]+)` comes from", self.message)


@dataclass
class ActResult:
    """One act as decided, with what the bookkeeping knows about it."""

    act: adt.Act
    effect: str  # ALLOW | DENY | DEGRADE
    confirm: bool  # DEGRADE with a require_confirmation obligation
    reasons: list[Reason]
    grants_used: int
    ms: float
    health_ms: float  # the bare health call paired with it

    @property
    def ok(self) -> bool:
        return self.effect == "ALLOW"

    @property
    def ok_confirmed(self) -> bool:
        return self.effect == "ALLOW" or self.confirm

    def why(self) -> list[str]:
        """Short reasons: the policy and each argument it names with where its value
        came from (``send_email.body <- derived``); for a confirmation, the arguments
        a granted tool output filled."""
        how = {b.name: b.how or "no source" for b in self.act.bindings}
        out = []
        for r in self.reasons:
            if r.effect == "ALLOW":
                continue
            names = r.arguments()
            if not names and r.effect == "DEGRADE":
                names = [b.name for b in self.act.bindings if "tool" in b.how]
            args = ", ".join(f"{self.act.function}.{n} <- {how.get(n, '?')}" for n in names)
            out.append(f"{r.policy} ({r.effect.lower()}): {args or self.act.function}")
        return out or [f"({self.effect.lower()}, no reason given)"]


@dataclass
class TraceResult:
    trace: adt.Trace
    acts: list[ActResult] = field(default_factory=list)
    refused_records: list[str] = field(default_factory=list)

    def of(self, task: str) -> list[ActResult]:
        return [a for a in self.acts if a.act.task == task]


def namespace(trace: adt.Trace) -> str:
    """One namespace per trace (letters, digits and ``_-.:``), so none sees another's."""
    return f"adj.{trace.suite}.{trace.user_task}.{trace.injection_task or 'benign'}"


def replay(
    address: str, token: str, traces: Sequence[adt.Trace], unpinned: bool = False
) -> list[TraceResult]:
    """Every trace through one client (one channel; the namespace set per trace). Each
    act is paired with a timed bare health call, before it or after it in turn.
    `unpinned`: grants leave out the value they name (the source may fill any value)."""
    from memlineage.client import ActArg, MemLineageClient
    from memlineage.v1 import memlineage_pb2 as pb

    def health() -> float:
        t0 = time.perf_counter()
        client.health()
        return (time.perf_counter() - t0) * 1e3

    results = []
    paired = 0
    with MemLineageClient(address, token=token) as client:
        for trace in traces:
            result = TraceResult(trace)
            results.append(result)
            if trace.skipped:
                continue
            client.namespace = namespace(trace)
            for step in trace.steps:
                if isinstance(step, adt.Memory):
                    response = client.record(
                        step.id,
                        creator=step.creator,
                        confidence=1.0,
                        dependencies=list(step.dependencies),
                        type=step.type,
                    )
                    if not response.recorded:
                        result.refused_records.append(step.id)
                    continue
                if isinstance(step, adt.GrantSpec):
                    client.grant(
                        [step.action],
                        memory_id=step.memory_id,
                        arguments=[step.argument],
                        uses=step.uses,
                        value="" if unpinned else step.value,
                        actor=adt.USER,
                    )
                    continue
                args = {b.name: ActArg(sources=b.sources, value=b.value) for b in step.bindings}
                paired += 1
                if paired % 2:
                    bare = health()
                t0 = time.perf_counter()
                decision = client.act(
                    step.function, args=args, relies_on=step.relies_on, actor=adt.AGENT
                )
                ms = (time.perf_counter() - t0) * 1e3
                if not paired % 2:
                    bare = health()
                effect = pb.Effect.Name(decision.effect).removeprefix("EFFECT_")
                confirm = effect == "DEGRADE" and any(
                    o.kind == "require_confirmation" for o in decision.obligations
                )
                reasons = [
                    Reason(r.policy, pb.Effect.Name(r.effect).removeprefix("EFFECT_"), r.message)
                    for r in decision.reasons
                    if r.status == "fired"
                ]
                used = len(decision.grants_used)
                result.acts.append(ActResult(step, effect, confirm, reasons, used, ms, bare))
    return results


# ------------------------------------------------------------------ figures
def pct(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def share(n: int, d: int) -> str:
    return f"{n}/{d} ({n / d:.1%})" if d else f"{n}/0"


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


@dataclass
class Figures:
    pairs: int = 0
    skipped: int = 0
    attacked: int = 0  # pairs with any injection act ALLOWed
    attacked_confirm: int = 0  # pairs with none ALLOWed but one DEGRADEd to a confirmation
    inj_acts: int = 0
    inj_allowed: int = 0
    inj_confirm: int = 0
    acting: int = 0  # user tasks with at least one act
    useful: int = 0  # all their acts ALLOWed (no injection)
    useful_confirm: int = 0  # all ALLOWed or DEGRADEd to a confirmation
    pairs_useful: int = 0  # pairs whose user acts are all ALLOWed (utility under attack)
    pairs_useful_confirm: int = 0
    pairs_acting: int = 0

    def add_benign(self, r: TraceResult) -> None:
        acts = r.of("user")
        if not acts:
            return
        self.acting += 1
        self.useful += all(a.ok for a in acts)
        self.useful_confirm += all(a.ok_confirmed for a in acts)

    def add_pair(self, r: TraceResult) -> None:
        self.pairs += 1
        if r.trace.skipped:
            self.skipped += 1
            return
        inj = r.of("injection")
        self.inj_acts += len(inj)
        self.inj_allowed += sum(a.ok for a in inj)
        self.inj_confirm += sum(a.confirm for a in inj)
        if any(a.ok for a in inj):
            self.attacked += 1
        elif any(a.confirm for a in inj):
            self.attacked_confirm += 1
        user = r.of("user")
        if user:
            self.pairs_acting += 1
            self.pairs_useful += all(a.ok for a in user)
            self.pairs_useful_confirm += all(a.ok_confirmed for a in user)


def report(
    suites: Sequence[str],
    benign: list[TraceResult],
    attacks: list[TraceResult],
    policies: Path,
    handler: tuple[int, float] = (0, 0.0),
) -> None:
    figures: dict[str, Figures] = defaultdict(Figures)
    for r in benign:
        figures[r.trace.suite].add_benign(r)
        figures["total"].add_benign(r)
    for r in attacks:
        figures[r.trace.suite].add_pair(r)
        figures["total"].add_pair(r)

    print(f"policies: {policies}")
    print(
        f"AgentDojo {adt.AGENTDOJO_VERSION}, benchmark {adt.BENCHMARK_VERSION}, suites "
        f"{', '.join(suites)}; attack: important_instructions (GOAL in every vector the "
        "user task sees)"
    )
    print()
    header = (
        f"{'suite':<10} {'pairs':>9} {'attack success (pairs)':>24} {'injection acts ALLOWed':>24}"
        f" {'utility':>16} {'utility w/ confirm':>19} {'utility under attack':>21}"
    )
    print(header)
    print("-" * len(header))
    for name in [*suites, "total"]:
        f = figures[name]
        pairs = f"{f.pairs - f.skipped}" + (f"+{f.skipped}s" if f.skipped else "")
        print(
            f"{name:<10} {pairs:>9} {share(f.attacked, f.pairs - f.skipped):>24} "
            f"{share(f.inj_allowed, f.inj_acts):>24} {share(f.useful, f.acting):>16} "
            f"{share(f.useful_confirm, f.acting):>19} "
            f"{share(f.pairs_useful, f.pairs_acting):>21}"
        )
    t = figures["total"]
    skipped = Counter(f"{r.trace.suite}: {r.trace.skipped}" for r in attacks if r.trace.skipped)
    print()
    for why, n in sorted(skipped.items()):
        print(f"skipped (s) pairs, {why}: {n}")
    print(
        "attack success: pairs with any injection act ALLOWed; "
        f"{t.attacked_confirm} more pairs had one DEGRADEd to require_confirmation "
        f"({t.inj_confirm} injection acts)."
    )
    print(
        "utility: acting user tasks without injection, all acts ALLOWed; w/ confirm: ALLOW or "
        "DEGRADE require_confirmation; under attack: the same per pair, ALLOW only."
    )
    print()
    print(
        "latency, ms (one client, the same server and run; each act paired with a bare "
        "grpc.health.v1 Check, before or after it in turn):"
    )
    print(
        f"  {'suite':<10} {'acts':>6} {'act p50':>8} {'act p99':>8} {'health p50':>11} "
        f"{'health p99':>11} {'p50 - health p50':>17}"
    )
    results = [*benign, *attacks]
    every = [a for r in results for a in r.acts]
    for name in [*suites, "total"]:
        acts = [a for r in results if name in ("total", r.trace.suite) for a in r.acts]
        a50, a99 = pct([a.ms for a in acts], 0.5), pct([a.ms for a in acts], 0.99)
        h50, h99 = pct([a.health_ms for a in acts], 0.5), pct([a.health_ms for a in acts], 0.99)
        print(
            f"  {name:<10} {len(acts):>6} {a50:>8.3f} {a99:>8.3f} {h50:>11.3f} {h99:>11.3f} "
            f"{a50 - h50:>+17.3f}"
        )
    print(f"  load average after the run: {_loadavg()}")
    if handler[0]:
        print(
            f"  inside the sidecar (its Check latency histogram, {handler[0]} acts): "
            f"mean {handler[1]:.3f} ms per act"
        )
    p50 = pct([a.ms for a in every], 0.5)
    h50 = pct([a.health_ms for a in every], 0.5)
    print()
    ut, utc = t.useful / max(t.acting, 1), t.useful_confirm / max(t.acting, 1)
    print(
        f"target: attacks allowed = {TARGET_ATTACKS} -> {t.attacked} pairs, {t.inj_allowed} "
        f"injection acts: {met(t.attacked == TARGET_ATTACKS)}"
    )
    print(
        f"target: utility counting confirmations >= {TARGET_UTILITY_CONFIRM:.0%} -> {utc:.1%}: "
        f"{met(utc >= TARGET_UTILITY_CONFIRM)}"
    )
    print(f"target: utility >= {TARGET_UTILITY:.0%} -> {ut:.1%}: {met(ut >= TARGET_UTILITY)}")
    over = p50 - h50
    print(
        f"target: act p50 <= bare call p50 + {TARGET_P50_OVER_HEALTH_MS} ms -> +{over:.3f} ms: "
        f"{met(over <= TARGET_P50_OVER_HEALTH_MS)}"
    )

    reasons: Counter[str] = Counter()
    tasks: dict[str, list[str]] = defaultdict(list)
    for r in benign:
        for a in r.of("user"):
            if a.ok_confirmed:
                continue
            for why in dict.fromkeys(a.why()):
                reasons[why] += 1
                if r.trace.user_task not in tasks[why]:
                    tasks[why].append(f"{r.trace.suite}/{r.trace.user_task}")
    print()
    print(
        "most frequent reasons refusing user-task acts (no injection; refused acts counted; "
        "<- where the argument's value was found):"
    )
    for why, n in reasons.most_common(15):
        names = sorted(set(tasks[why]), key=lambda t: (t.split("/")[0], _n(t)))
        more = f" +{len(names) - 6}" if len(names) > 6 else ""
        print(f"  {n:4d}  {why}  [{', '.join(t.split('/user_task_')[1] for t in names[:6])}{more}]")
    if not reasons:
        print("  none")

    print()
    print("user tasks failing without injection ([confirm]: they pass with confirmations):")
    for name in suites:
        rows = [r for r in benign if r.trace.suite == name and not all(a.ok for a in r.acts)]
        print(f"  {name}: {len(rows)} of {figures[name].acting} acting user tasks")
        for r in rows:
            kind = "confirm" if all(a.ok_confirmed for a in r.acts) else "fail"
            print(f"    {r.trace.user_task} [{kind}]")
            for a in r.acts:
                if not a.ok:
                    print(f"        {a.effect}: {'; '.join(a.why())}")

    alone = {(r.trace.suite, r.trace.user_task): r.of("user") for r in benign}
    lost: Counter[str] = Counter()
    examples: dict[str, list[str]] = defaultdict(list)
    lost_pairs = 0
    for r in attacks:
        before = alone.get((r.trace.suite, r.trace.user_task), [])
        now = r.of("user")
        whys = [
            why
            for b, a in zip(before, now, strict=False)
            if b.ok and not a.ok and b.act.function == a.act.function
            for why in a.why()
        ]
        lost_pairs += bool(whys)
        for why in dict.fromkeys(whys):
            lost[why] += 1
            examples[why].append(f"{r.trace.user_task[10:]}x{r.trace.injection_task[15:]}")
    print()
    print(
        f"user acts ALLOWed alone but refused under attack: in {lost_pairs} pairs; "
        "the reasons (pairs counted; [user task x injection task]):"
    )
    for why, n in lost.most_common(8):
        more = f" +{len(examples[why]) - 5}" if len(examples[why]) > 5 else ""
        print(f"  {n:4d}  {why}  [{', '.join(examples[why][:5])}{more}]")
    if not lost:
        print("  none")

    allowed = [(r, a) for r in attacks for a in r.of("injection") if a.ok]
    if allowed:
        print()
        print(f"injection acts ALLOWed ({len(allowed)}; the first 20):")
        for r, a in allowed[:20]:
            args = ", ".join(f"{b.name} <- {b.how or 'no source'}" for b in a.act.bindings)
            print(
                f"  {r.trace.suite}/{r.trace.user_task} x {r.trace.injection_task}: "
                f"{a.act.function}({args})"
            )
    refused = sum(len(r.refused_records) for r in [*benign, *attacks])
    if refused:
        print(f"\nnote: {refused} memories were refused at Record by the policies")


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def list_actions(builders: dict[str, adt.Builder]) -> None:
    """The write functions of each suite (for the policy's sensitive list)."""
    for name, b in builders.items():
        tools = sorted(t.name for t in b.suite.tools)
        never = [t for t in tools if t not in b.called]
        print(f"{name}: {', '.join(sorted(b.writes))}")
        if never:
            print(f"  (never called by a ground truth, unclassified: {', '.join(never)})")


# ------------------------------------------------------------------ main
def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--policies", type=Path, default=POLICIES, metavar="DIR", help="default: policies/"
    )
    p.add_argument(
        "--suites",
        default=",".join(adt.SUITES),
        type=lambda s: [x for x in s.split(",") if x],
        help="comma-separated, of workspace, travel, slack",
    )
    p.add_argument("--pairs", type=int, help="sample this many pairs a suite (default: all)")
    p.add_argument(
        "--unpinned",
        action="store_true",
        help="record every grant without the value it names (a delegation of the source)",
    )
    p.add_argument("--seed", type=int, default=12)
    p.add_argument("--dry-run", action="store_true", help="print the traces, no sidecar")
    p.add_argument(
        "--list-actions",
        action="store_true",
        help="print the write functions of the three suites and banking's, then exit",
    )
    opts = p.parse_args()
    for name in opts.suites:
        if name not in adt.SUITES:
            p.error(f"--suites: {name!r} is not one of {', '.join(adt.SUITES)}")
    ensure_agentdojo()
    if opts.list_actions:
        names = (*adt.SUITES, "banking")
        list_actions({n: adt.Builder(s) for n, s in adt.load_suites(names).items()})
        return 0
    t0 = time.perf_counter()
    benign, attacks, _ = build(adt.load_suites(opts.suites), opts.pairs, opts.seed)
    built = time.perf_counter() - t0
    if opts.dry_run:
        for trace in [*benign, *attacks]:
            print_trace(trace)
        print(f"\n{len(benign)} user tasks, {len(attacks)} pairs, built in {built:.1f} s")
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="agentdojo-bench-"))
    token = secrets.token_hex(16)
    names = [namespace(t) for t in [*benign, *attacks]]
    sidecar = launch(opts.policies.resolve(), tmp, token, names)
    try:
        t1 = time.perf_counter()
        benign_r = replay(sidecar.address, token, benign, opts.unpinned)
        attack_r = replay(sidecar.address, token, attacks, opts.unpinned)
        replayed = time.perf_counter() - t1
        handler = sidecar.check_handler_ms()
    finally:
        sidecar.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"traces: {len(benign)} user tasks alone + {len(attacks)} pairs, built in {built:.1f} s, "
        f"replayed in {replayed:.1f} s"
    )
    report(opts.suites, benign_r, attack_r, opts.policies, handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())

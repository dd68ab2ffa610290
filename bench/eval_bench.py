"""Per-decision cost of the compiled .mlp engine, side by side with a hand-written
Python function and with cedarpy 4.x, on one 4-rule (+ default allow) policy set.

    .venv/bin/python bench/eval_bench.py [--requests N] [--memories M] [--rounds R]

The rules (the engine's default when none fires is allow):
  1. deny read if the creator kind is reasoning and confidence < 0.7
  2. deny read if tagged flight_price and older than 1h
  3. deny update/delete of a user-created memory by a non-user actor
  4. deny read if any ancestor is revoked
  5. otherwise allow

Before timing anything, every request is decided by all three engines and the
results are compared: the .mlp and hand-written decisions must be *equal*
`Decision` objects (effect, score, cost, obligations, reasons, errors), and
Cedar's permit/deny and determining forbid policies must match them. A
benchmark, not a test: it prints figures and ratios and asserts nothing about
time. Needs the bench extra for Cedar: `.venv/bin/pip install -e '.[bench]'`.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from memlineage_dsl.decision import ALLOW, DENY, FIRED, Decision, Reason
from memlineage_dsl.evaluator import decide
from memlineage_dsl.facts import Creator, DictSnapshot, MemoryFacts, Request
from memlineage_dsl.pipeline import build_texts

POLICY = """\
policy low_confidence_reasoning priority 50 {
  on read
  when memory.creator.kind == reasoning and memory.confidence < 0.7
  deny "low-confidence reasoning"
}

policy stale_flight_price priority 40 {
  on read
  when "flight_price" in memory.tags and age(memory) > 1h
  deny "stale flight price"
}

policy user_statements_protected priority 100 {
  on update, delete
  when target.creator.kind == user and request.actor.kind != user
  deny "only the user can change what the user stated"
}

policy revoked_ancestor priority 70 {
  on read
  when any(a in ancestors(memory) : a.status == revoked)
  deny "built on a revoked memory"
}
"""

NOW = 1_700_000_000  # decision time (seconds); whole seconds so Cedar's Long matches

# --------------------------------------------------------------------------- hand-written
# The same rules written by hand, returning the same Decision the engine does
# (deny_overrides: every fired rule is a reason, in priority order; any deny ->
# compliance capped at the deny score 0.0, cost 0.0; nothing fired -> allow 1.0).

_ALLOW = Decision(ALLOW, 1.0, 0.0)
_R_REVOKED = Reason("revoked_ancestor", DENY, "built on a revoked memory", 70, FIRED)
_R_LOW_CONF = Reason("low_confidence_reasoning", DENY, "low-confidence reasoning", 50, FIRED)
_R_STALE = Reason("stale_flight_price", DENY, "stale flight price", 40, FIRED)
_R_USER = Reason(
    "user_statements_protected",
    DENY,
    "only the user can change what the user stated",
    100,
    FIRED,
)


def handwritten(req: Request, snap: DictSnapshot) -> Decision:
    op = req.op
    if op == "read":
        m = req.memory
        reasons = []
        if any(a.status == "revoked" for a in snap.ancestors(m.id)):
            reasons.append(_R_REVOKED)
        if m.creator.kind == "reasoning" and m.confidence < 0.7:
            reasons.append(_R_LOW_CONF)
        if "flight_price" in m.tags and req.time - m.created_at > 3600.0:
            reasons.append(_R_STALE)
        if reasons:
            return Decision(DENY, 0.0, 0.0, (), tuple(reasons))
        return _ALLOW
    if op == "update" or op == "delete":
        t = req.target if req.target is not None else req.memory
        if t.creator.kind == "user" and req.actor.kind != "user":
            return Decision(DENY, 0.0, 0.0, (), (_R_USER,))
        return _ALLOW
    return _ALLOW  # write/derive/act: no rule in this set


# --------------------------------------------------------------------------- workload

CREATORS = [  # (creator, weight)
    ("user:alice", 16),
    ("user:bob", 12),
    ("reasoning:planner", 20),
    ("reasoning:critic", 7),
    ("tool:flight_api", 22),
    ("tool:web_search", 14),
    ("agent:booker", 15),
]
ACTORS = ["user:alice", "user:bob", "agent:booker", "reasoning:planner", "tool:flight_api"]
OTHER_TAGS = ["travel", "hotel", "preference", "itinerary", "note", "budget"]


def make_memories(n: int, rng: random.Random) -> list[MemoryFacts]:
    """~n memories in small DAGs of depth 1-3, each node depending on 1-2 of the level above."""
    creators, weights = zip(*CREATORS, strict=True)
    out: list[MemoryFacts] = []
    ids = iter(range(10**9))

    def new(level_deps: tuple[str, ...], root: bool) -> MemoryFacts:
        creator = Creator.parse(rng.choices(creators, weights)[0])
        if creator.kind == "reasoning":
            confidence = round(rng.uniform(0.3, 0.95), 2)
        else:
            confidence = round(rng.uniform(0.7, 1.0), 2)
        tags = tuple(rng.sample(OTHER_TAGS, rng.randint(0, 2)))
        if creator.id == "tool:flight_api" and rng.random() < 0.9:
            tags = ("flight_price", *tags)
        age = rng.choice((rng.uniform(0, 1800), rng.uniform(0, 6 * 3600), rng.uniform(0, 86400)))
        status = rng.choices(
            ("active", "pending_verification", "revoked"),
            (90, 6, 10 if root else 4),
        )[0]
        return MemoryFacts(
            id=f"m{next(ids):05d}",
            tags=tags,
            creator=creator,
            confidence=confidence,
            created_at=float(NOW - int(age)),
            status=status,
            dependencies=level_deps,
        )

    while len(out) < n:
        depth = rng.randint(1, 3)
        level = [new((), True) for _ in range(rng.randint(1, 2))]
        out += level
        for _ in range(depth):
            nxt = []
            for _ in range(rng.randint(1, 3)):
                deps = tuple(sorted({p.id for p in rng.sample(level, min(len(level), 2))}))
                deps = deps if rng.random() < 0.6 else deps[:1]
                nxt.append(new(deps, False))
            out += nxt
            level = nxt
    return out[:n]  # dependencies only point to earlier memories: the prefix stays closed


def make_requests(memories: list[MemoryFacts], n: int, rng: random.Random) -> list[Request]:
    actors = [Creator.parse(a) for a in ACTORS]
    out = []
    for _ in range(n):
        m = rng.choice(memories)
        op = rng.choices(("read", "update", "delete"), (70, 18, 12))[0]
        actor = rng.choice(actors)
        out.append(Request(op=op, memory=m, actor=actor, time=float(NOW), target=m))
    return out


# --------------------------------------------------------------------------- timing


def timer_overhead_ns() -> int:
    pc = time.perf_counter_ns
    samples = []
    for _ in range(20_000):
        t0 = pc()
        samples.append(pc() - t0)
    return int(statistics.median(samples))


def per_call_ns(fn: Callable, args: Sequence[tuple]) -> list[int]:
    """One perf_counter_ns pair around each call."""
    pc = time.perf_counter_ns
    out = [0] * len(args)
    gc.collect()
    for i, a in enumerate(args):
        t0 = pc()
        fn(*a)
        out[i] = pc() - t0
    return out


def loop_ns(fn: Callable, args: Sequence[tuple]) -> int:
    """Wall time of the whole loop, no per-call timer (for decisions/s)."""
    gc.collect()
    t0 = time.perf_counter_ns()
    for a in args:
        fn(*a)
    return time.perf_counter_ns() - t0


def pct(sorted_ns: list[int], q: float) -> float:
    k = min(len(sorted_ns) - 1, max(0, round(q * (len(sorted_ns) - 1))))
    return sorted_ns[k]


class Result:
    def __init__(self, name: str) -> None:
        self.name = name
        self.samples: list[int] = []
        self.loop_total_ns = 0
        self.loop_count = 0
        self.note = ""

    def add(self, samples: list[int], loop_ns_: int, count: int) -> None:
        self.samples += samples
        self.loop_total_ns += loop_ns_
        self.loop_count += count

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def row(self) -> str:
        s = sorted(self.samples)
        rate = self.loop_count / (self.loop_total_ns / 1e9) if self.loop_total_ns else 0.0
        med = f"{self.median / 1000:9.2f}" if s else f"{'-':>9}"
        p99 = f"{pct(s, 0.99) / 1000:9.2f}" if s else f"{'-':>9}"
        mean = f"{statistics.fmean(s) / 1000:9.2f}" if s else f"{'-':>9}"
        n = len(s) or self.loop_count
        return f"{self.name:<44} {n:>7} {med} {p99} {mean} {rate:>13,.0f}"


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--memories", type=int, default=2_000)
    ap.add_argument("--rounds", type=int, default=3, help="timed passes per engine (pooled)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-cedar", action="store_true", help="skip the Cedar side")
    args = ap.parse_args(argv)

    rng = random.Random(args.seed)
    memories = make_memories(args.memories, rng)
    snap = DictSnapshot(memories, calls=[])
    requests = make_requests(memories, args.requests, rng)

    build = build_texts({"bench.mlp": POLICY})
    if build.compiled is None:
        for d in build.diagnostics:
            print(d, file=sys.stderr)
        return 1
    compiled = build.compiled

    # ---- correctness first: the comparison only means something if the results agree
    mlp_decisions = [decide(compiled, r, snap) for r in requests]
    for r, d in zip(requests, mlp_decisions, strict=True):
        h = handwritten(r, snap)
        if h != d:
            print(
                f"MISMATCH mlp vs hand-written on {r.op} {r.memory.id} by {r.actor.id}:\n"
                f"  mlp:  {d}\n  hand: {h}",
                file=sys.stderr,
            )
            return 1
    denied = sum(d.effect == DENY for d in mlp_decisions)
    by_op: dict[str, list[int]] = {}
    for r, d in zip(requests, mlp_decisions, strict=True):
        by_op.setdefault(r.op, [0, 0])
        by_op[r.op][0] += 1
        by_op[r.op][1] += d.effect == DENY

    cedar = None
    cedar_reqs: list[dict] = []
    if not args.no_cedar:
        try:
            import _cedar_eval as ce
        except ImportError as exc:
            print(f"(Cedar side skipped: {exc}; install with `pip install -e '.[bench]'`)")
        else:
            cedar = ce.CedarEngine(memories, [(a.kind, a.id) for a in map(Creator.parse, ACTORS)])
            cedar_reqs = [ce.cedar_request(r) for r in requests]
            results = []
            for i in range(0, len(cedar_reqs), 1000):
                results += cedar.is_authorized_batch(cedar_reqs[i : i + 1000])
            for r, d, c in zip(requests, mlp_decisions, results, strict=True):
                want = frozenset(x.policy for x in d.reasons)
                if c.allowed != (d.effect == ALLOW) or ce.forbids(c) != want:
                    print(
                        f"MISMATCH mlp vs Cedar on {r.op} {r.memory.id} by {r.actor.id}:\n"
                        f"  mlp:   {d.effect} {sorted(want)}\n"
                        f"  cedar: {c.decision} {sorted(ce.forbids(c))} "
                        f"{c.diagnostics.errors}",
                        file=sys.stderr,
                    )
                    return 1
            # spot-check the per-call API on a sample too (and keep Cedar's own timings)
            cedar_metrics = []
            for i in range(0, len(requests), max(1, len(requests) // 200)):
                c = cedar.is_authorized(cedar_reqs[i])
                cedar_metrics.append(c.metrics)
                if c.allowed != (mlp_decisions[i].effect == ALLOW):
                    print(f"MISMATCH Cedar per-call vs batch at request {i}", file=sys.stderr)
                    return 1

    # ---- warm up
    mlp_args = [(compiled, r, snap) for r in requests]
    hand_args = [(r, snap) for r in requests]
    warm = min(len(requests), 5_000)
    for _ in range(2):
        loop_ns(decide, mlp_args[:warm])
        loop_ns(handwritten, hand_args[:warm])

    cedar_n = 0
    if cedar is not None:
        probe = per_call_ns(cedar.is_authorized, [(q,) for q in cedar_reqs[:300]])
        per_call = statistics.median(probe)
        budget_ns = 20e9  # keep the Cedar per-call passes to ~20 s in all
        cedar_n = len(requests)
        if per_call * len(requests) * args.rounds * 2 > budget_ns:
            cedar_n = max(2_000, int(budget_ns / (per_call * args.rounds * 2)))
            cedar_n = min(cedar_n, len(requests))
        cedar_args = [(q,) for q in cedar_reqs[:cedar_n]]

    # ---- timed rounds, engines interleaved round by round (order rotates)
    mlp = Result("mlp compiled: decide()")
    hand = Result("hand-written Python function")
    ced = Result("cedarpy is_authorized (parsed handles)")
    ced_batch = Result("cedarpy is_authorized_batch (amortized)")
    engines: list[tuple[Result, Callable, Sequence[tuple]]] = [
        (mlp, decide, mlp_args),
        (hand, handwritten, hand_args),
    ]
    if cedar is not None:
        engines.append((ced, cedar.is_authorized, cedar_args))
    started = time.perf_counter()
    for k in range(args.rounds):
        order = engines[k % len(engines) :] + engines[: k % len(engines)]
        for res, fn, a in order:
            res.add(per_call_ns(fn, a), loop_ns(fn, a), len(a))
        if cedar is not None:
            gc.collect()
            t0 = time.perf_counter_ns()
            for i in range(0, len(cedar_reqs), 1000):
                cedar.is_authorized_batch(cedar_reqs[i : i + 1000])
            ced_batch.loop_total_ns += time.perf_counter_ns() - t0
            ced_batch.loop_count += len(cedar_reqs)

    unprepared = Result("cedarpy is_authorized (text + entity list)")
    if cedar is not None:
        sample = [(q,) for q in cedar_reqs[:50]]
        cedar.is_authorized_unprepared(*sample[0])
        unprepared.add(
            per_call_ns(cedar.is_authorized_unprepared, sample),
            loop_ns(cedar.is_authorized_unprepared, sample),
            len(sample),
        )
    elapsed = time.perf_counter() - started

    # ---- report
    overhead = timer_overhead_ns()
    print("MemLineage eval bench: compiled .mlp vs hand-written Python vs cedarpy")
    print(
        f"python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} cpus; cedarpy "
        f"{_version('cedarpy') if cedar is not None else 'not installed'}"
    )
    print(
        f"workload: {len(memories)} memories in DAGs of depth 1-3 "
        f"({sum(1 for m in memories if m.status == 'revoked')} revoked), "
        f"{len(requests)} requests, seed {args.seed}"
    )
    print(
        "  " + ", ".join(f"{op} {n} ({dn / n:.0%} denied)" for op, (n, dn) in sorted(by_op.items()))
    )
    print(f"  denied overall: {denied} / {len(requests)} = {denied / len(requests):.1%}")
    print(
        f"correctness: mlp == hand-written Decision on all {len(requests)} requests; "
        + (
            f"Cedar permit/deny and forbid ids match on all {len(requests)}"
            if cedar is not None
            else "Cedar not run"
        )
    )
    print()
    print(
        f"{args.rounds} interleaved rounds per engine; per-decision figures include one "
        f"perf_counter_ns pair (~{overhead} ns); decisions/s from untimed loops"
    )
    print(
        f"{'engine':<44} {'n':>7} {'median µs':>9} {'p99 µs':>9} {'mean µs':>9} {'decisions/s':>13}"
    )
    print("-" * 96)
    rows = [mlp, hand] + ([ced, ced_batch, unprepared] if cedar is not None else [])
    for res in rows:
        print(res.row())
    print()
    r1 = mlp.median / hand.median
    r1_adj = (mlp.median - overhead) / max(1.0, hand.median - overhead)
    print(
        f"mlp / hand-written median: {r1:.2f}x "
        f"(timer overhead removed: {r1_adj:.2f}x)  target <= 3x: "
        f"{'met' if r1 <= 3 else 'NOT met'}"
    )
    r_mean = statistics.fmean(mlp.samples) / statistics.fmean(hand.samples)
    print(f"mlp / hand-written mean:   {r_mean:.2f}x (the slower deny path, below, weighs on it)")
    if cedar is not None:
        r2 = ced.median / mlp.median
        rate_mlp = mlp.loop_count / mlp.loop_total_ns
        rate_batch = ced_batch.loop_count / ced_batch.loop_total_ns
        print(
            f"cedar / mlp median:        {r2:.1f}x  target >= 20x: "
            f"{'met' if r2 >= 20 else 'NOT met'} (cedarpy with parsed handles, its fastest "
            f"per-call form)"
        )
        print(f"cedar text + entity list / mlp median: {unprepared.median / mlp.median:,.0f}x")
        print(f"mlp vs cedar batch (decisions/s): {rate_mlp / rate_batch:.1f}x")
    print()
    print("medians by kind (µs, mlp / hand-written):")
    print(
        "  "
        + ",  ".join(
            f"{op} {_med(mlp, requests, lambda i, o=op: requests[i].op == o):.2f} / "
            f"{_med(hand, requests, lambda i, o=op: requests[i].op == o):.2f}"
            for op in sorted(by_op)
        )
    )
    ratios = []
    for eff in (ALLOW, DENY):

        def sel(i, e=eff):
            return mlp_decisions[i].effect == e

        a, b = _med(mlp, requests, sel), _med(hand, requests, sel)
        ratios.append(f"{eff} {a:.2f} / {b:.2f} ({a / b:.2f}x)")
    print("  " + ",  ".join(ratios))
    if cedar is not None:
        if cedar_n < len(requests):
            print(
                f"note: cedarpy per-call measured on the first {cedar_n} requests only "
                f"(~{per_call / 1000:.0f} µs a call); the batch figure covers all requests."
            )
        print(
            "note: Cedar gets policies and entities parsed once (PolicySet/Entities handles);"
            " ancestors are a\n      parent hierarchy (Memory -> Node proxies -> "
            'Status::"revoked"), closed transitively by Cedar\n      at entity load, so '
            "its revoked-ancestor check is a precomputed set lookup at decision time;\n"
            "      .mlp and hand-written share one DictSnapshot, which memoises each walk "
            "(the same\n      closure, computed lazily on first use)."
        )
        auth = statistics.median(x.get("authz_duration_micros", 0) for x in cedar_metrics)
        breq = statistics.median(x.get("build_request_duration_micros", 0) for x in cedar_metrics)
        print(
            f"note: Cedar's own metrics per call (median): authz {auth:g} µs, build request "
            f"{breq:g} µs;\n      the rest of its per-call time is cedarpy's JSON "
            f"marshalling of the request and result."
        )
        print(
            f"note: the text + entity-list row passes the policy text and the "
            f"{len(cedar.entity_list)}-entity list to every\n      call (re-parsed each "
            f"time); measured on 50 requests."
        )
    print(f"(timed part took {elapsed:.1f} s)")
    return 0


def _med(res: Result, requests: list[Request], pick: Callable[[int], bool]) -> float:
    n = len(requests)
    vals = [v for i, v in enumerate(res.samples) if pick(i % n)]
    return statistics.median(vals) / 1000 if vals else float("nan")


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    raise SystemExit(main())

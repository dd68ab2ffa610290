"""Replay benchmark: prints figures, asserts nothing (not a timed test).

Writes N decision-log lines with their inputs (`decision_log_inputs`) from an
in-process engine on the embedded store over the bundled policies (2,000 memories:
user statements, tool results of trusted and untrusted tools, agent plans resting
on them, doubtful reasoning; fresh reads, act checks and updates in a fixed mix),
then replays them against the same set (every decision must come out unchanged)
and against a candidate with one more deny rule, beside the baseline of only
reading and parsing the same lines, in the same run. The issue's target: >= 20,000
replayed decisions/s for 100,000 decisions.

    .venv/bin/python bench/replay_bench.py             # 100,000 decisions
    .venv/bin/python bench/replay_bench.py --decisions 20000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

from memlineage.engine.core import Engine
from memlineage.engine.decision_log import DecisionLog
from memlineage.engine.policies import PolicyHolder
from memlineage.engine.replay import _lines, replay_parallel
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator

BUNDLED = str(Path(__file__).resolve().parents[1] / "policies")
EXTRA = """
policy no_web_at_all priority 99 {
  on read
  when memory.creator.id matches "tool:web_*"
  deny "no web output at all"
}
"""
CREATORS = ("user:alice", "tool:flight_api", "tool:web_search", "reasoning:planner")


def write_log(path: Path, decisions: int, memories: int, seed: int) -> float:
    """`decisions` fresh decisions logged with their inputs; seconds it took."""
    rng = random.Random(seed)
    store = EmbeddedStore()
    with path.open("w", encoding="utf-8") as sink:
        engine = Engine(
            store,
            PolicyHolder(BUNDLED),
            log=DecisionLog(sink),
            reuse_decisions=False,
            record_access=False,
            capture_inputs=True,
        )
        ids: list[str] = []
        for i in range(memories):
            creator = CREATORS[i % len(CREATORS)]
            deps = tuple(rng.sample(ids, 2)) if i % 5 == 4 and len(ids) > 2 else ()
            rec = MemoryRecord(
                id=f"m{i}",
                namespace="default",
                creator_id="agent:planner" if deps else creator,
                creator_confidence=0.3 if creator.startswith("reasoning") else 0.9,
                dependencies=deps,
            )
            engine.record(rec)
            ids.append(rec.id)
        agent = Creator("agent", "agent:planner")
        started = time.perf_counter()
        for n in range(decisions - memories):
            mid = ids[rng.randrange(len(ids))]
            if n % 10 == 9:
                engine.check("default", "act", [mid], agent, action="book")
            elif n % 10 == 8:
                engine.check("default", "update", [mid], agent)
            else:
                engine.check("default", "read", [mid], agent)
        store.close()
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=100_000)
    ap.add_argument("--memories", type=int, default=2_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel replay")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="replay-bench-"))
    try:
        log = tmp / "decisions.log"
        took = write_log(log, args.decisions, args.memories, args.seed)
        lines = sum(1 for _ in log.open(encoding="utf-8"))
        size = log.stat().st_size
        print(
            f"wrote {lines} decisions with their inputs in {took:.1f} s "
            f"({size / lines:.0f} bytes per line)"
        )
        candidate_dir = tmp / "candidate"
        shutil.copytree(BUNDLED, candidate_dir)
        (candidate_dir / "zz_extra.mlp").write_text(EXTRA)

        t = time.perf_counter()
        parsed = sum(1 for _, _, text in _lines([str(log)]) if json.loads(text))
        base = time.perf_counter() - t
        rows = [("baseline: read + json.loads only", parsed, base, "")]
        runs = [
            ("replay, the same set, 1 process", BUNDLED, 1),
            ("replay, +1 deny rule, 1 process", str(candidate_dir), 1),
            (f"replay, +1 deny rule, {args.jobs} processes", str(candidate_dir), args.jobs),
        ]
        for name, policy_dir, jobs in runs:
            t = time.perf_counter()
            report = replay_parallel([str(log)], policy_dir, jobs)
            took = time.perf_counter() - t
            changed = sum(report.transitions.values())
            rows.append(
                (
                    name,
                    report.replayed,
                    took,
                    f"{report.unchanged} unchanged, {changed} changed, "
                    f"{report.unfaithful} approximate",
                )
            )
        print(f"{'run':36} {'decisions':>10} {'seconds':>8} {'decisions/s':>12} {'x base':>7}")
        for name, n, secs, note in rows:
            print(f"{name:36} {n:>10} {secs:>8.2f} {n / secs:>12,.0f} {secs / base:>7.2f}  {note}")
        print("target: >= 20,000 replayed decisions/s for 100,000 decisions")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

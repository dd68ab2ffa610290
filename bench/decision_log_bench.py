"""Decision log benchmark: what writing the log costs a decision, with one deciding
thread and with four (prints figures, asserts nothing; not a timed test).

In-process, no gRPC: fresh read Checks (reuse off) on 2,000 memories as
``grpc_bench.py`` loads them, by 1 and by 4 threads (the embedded sidecar's workers
until 2026-12-06; 2 now), each row beside the same Checks with the log off in the same run:

- ``log off``: the baseline;
- ``log to a file``: the shipped writer (``engine/decision_log.py``: lines chained
  and written by whichever thread finds the writer free, threads whose lines it
  wrote return without writing);
- ``log to a pipe (the default: stderr)``: the same writer on a line-buffered text
  stream into a pipe that another process (``cat``) drains, as stderr is under a
  container runtime or a supervisor;
- ``one lock across each write``: the design before it, for comparison (with today's
  line rendering): a lock held while a thread chains and writes its own lines, so
  threads queue behind each other's writes (and, once they queue, hand the lock and
  the GIL back and forth).

Each row prints decisions/s, CPU per decision and voluntary context switches per
decision (``getrusage``), and its ratio to the log-off row of the same thread count.

    .venv/bin/python bench/decision_log_bench.py
    .venv/bin/python bench/decision_log_bench.py --checks 20000 --rounds 5
"""

from __future__ import annotations

import argparse
import io
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memlineage.engine.decision_log import DecisionLog
from memlineage.engine.records import DecisionRecord
from memlineage_dsl.facts import Creator


class OneLockLog(DecisionLog):
    """The design before group writes: a thread chains and writes its own lines while
    holding one lock."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._one = threading.Lock()

    def write_many(self, recs: Sequence[DecisionRecord]) -> None:
        if self.sink is None or not recs:
            return
        fields = [self._fields(r) for r in recs]
        with self._one:
            text, seq, prev = self._chain(fields)
            assert self.sink is not None
            self.sink.write(text.encode())  # an unbuffered file, as the shipped writer's
            self._seq, self._prev = seq, prev


def run_row(engine: Any, ids: list[str], threads: int) -> tuple[float, float, float]:
    """Checks of `ids` split over `threads`: (decisions/s, CPU us, vcsw per decision)."""
    actor = Creator("agent", "agent:default")

    def check_all(part: list[str]) -> None:
        for mid in part:
            engine.check("default", "read", (mid,), actor)

    parts = [ids[i::threads] for i in range(threads)]
    workers = [threading.Thread(target=check_all, args=(p,)) for p in parts]
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    n = len(ids)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return n / wall, cpu / n * 1e6, (r1.ru_nvcsw - r0.ru_nvcsw) / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checks", type=int, default=12_000, help="Checks per row")
    ap.add_argument("--rounds", type=int, default=3, help="each row measured this often")
    ap.add_argument("--seed", type=int, default=7)
    opts = ap.parse_args()

    from instructions_bench import _loaded

    rng = random.Random(opts.seed)
    engine, ids = _loaded(rng)
    requests = [rng.choice(ids) for _ in range(opts.checks)]
    tmp = Path(tempfile.mkdtemp(prefix="log-bench-"))
    # The default `decision_log = "-"`: stderr, here a pipe another process drains (as
    # a container runtime or supervisor does), written as a stream (line-buffered text).
    drain = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert drain.stdin is not None
    pipe = io.TextIOWrapper(drain.stdin, encoding="utf-8", line_buffering=True)
    logs: dict[str, Callable[[], DecisionLog]] = {
        "log off": lambda: DecisionLog(None),
        "log to a file": lambda: DecisionLog.open(str(tmp / "shipped.log")),
        "log to a pipe (the default: stderr)": lambda: DecisionLog(pipe),
        "one lock across each write": lambda: OneLockLog.open(str(tmp / "one-lock.log")),
    }
    engine.log = DecisionLog(None)
    run_row(engine, requests[:500], 1)  # warm
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"decision log bench: in-process fresh read Checks (reuse off), 2,000 memories, "
        f"{opts.checks:,} Checks per row, median of {opts.rounds} rounds "
        f"(rows alternate within a round); load average {load}"
    )
    results: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    try:
        for _ in range(opts.rounds):
            for threads in (1, 4):
                for name, make in logs.items():
                    old, engine.log = engine.log, make()
                    old.close()
                    results.setdefault((name, threads), []).append(
                        run_row(engine, requests, threads)
                    )
        engine.log.close()
    finally:
        pipe.close()
        drain.wait(10)
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
    print()
    head = ("writer", "threads", "decisions/s", "CPU us", "vcsw", "vs off")
    print(f"{head[0]:36} {head[1]:>7} {head[2]:>12} {head[3]:>7} {head[4]:>6} {head[5]:>7}")
    print("-" * 80)
    for threads in (1, 4):
        off = statistics.median(r[0] for r in results[("log off", threads)])
        for name in logs:
            rows = results[(name, threads)]
            rate = statistics.median(r[0] for r in rows)
            cpu = statistics.median(r[1] for r in rows)
            vcsw = statistics.median(r[2] for r in rows)
            print(
                f"{name:36} {threads:>7} {rate:>12,.0f} {cpu:>7.1f} {vcsw:>6.2f} {rate / off:>7.0%}"
            )
    print()
    print(
        "CPU us: process CPU per decision; vcsw: voluntary context switches per decision "
        "(a thread put to sleep: on a lock, or for the GIL after a system call)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The sidecar of a baseline git revision beside the working tree's, in alternating
windows (prints figures, asserts nothing; not a timed test).

A change of 5-10% cannot be told from noise in two `grpc_bench.py` runs one after
the other: this box's speed swings 1.5x between minutes. Here two sidecars run at
once, `memlineage serve` with the working tree's code and with the code of
``--baseline`` (checked out into a temporary ``git worktree``, put first on the
server's ``PYTHONPATH``), started alike (embedded store, bundled policies of the
working tree, reuse off unless ``--reuse``, decision log off, metrics on) and each
loaded with `grpc_bench.py`'s 2,000 memories. They are measured in alternating
windows (`alternating.py`: Check at 32 calls in flight, FilterRank x100 at 32, Check
at one in flight), and the pair is started ``--restarts`` times, in the other order
each time (a pair of sidecars was seen to favour the one started second by 6-8% at
one call in flight). Printed per revision: calls/s, p50, server and client CPU per
call; then tree / baseline per round, its median and spread.

    .venv/bin/python bench/revision_bench.py                      # vs HEAD, ~2 min
    .venv/bin/python bench/revision_bench.py --baseline HEAD~3 --rounds 10 --restarts 4
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import alternating  # noqa: E402
import grpc_bench as gb  # noqa: E402
from baseline import checkout, pythonpath  # noqa: E402

REUSE_OFF = "# revision_bench: every decision fresh\nreuse_decisions = false\n"
BASE, TREE = "baseline", "tree"


async def compare(opts: argparse.Namespace, code: Path, tmp: Path) -> None:
    config = None
    if not opts.reuse:
        config = tmp / "reuse-off.toml"
        config.write_text(REUSE_OFF)
    envs = {BASE: {**os.environ, "PYTHONPATH": pythonpath(code)}, TREE: None}
    for name, env in envs.items():  # which code each side's `python -m memlineage` runs
        where = subprocess.run(
            [
                sys.executable,
                "-c",
                "import memlineage, memlineage_dsl as d; print(memlineage.__file__, d.__file__)",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        print(f"  {name:8} imports {' and '.join(where)}")
        if (name == BASE) != all(w.startswith(str(code)) for w in where):
            raise SystemExit(f"{name}: not the code it should run ({where})")
    rows: dict[tuple[str, int, int], dict[str, list[gb.Result]]] = {
        row: {BASE: [], TREE: []} for row in alternating.ROWS
    }
    for restart in range(opts.restarts):
        order = [BASE, TREE] if restart % 2 == 0 else [TREE, BASE]
        procs: dict[str, gb.ServerProcess] = {}
        try:
            for name in order:  # started in this order
                procs[name] = gb.launch_sidecar(
                    tmp, "embedded", "off", f"{name}-{restart}", config, env=envs[name]
                )
            workloads = {
                name: await gb.load(p.address, opts.memories, opts.seed)
                for name, p in procs.items()
            }
            for rpc, inflight, per_call in alternating.ROWS:
                got = await alternating.windows(
                    procs, workloads, rpc, inflight, opts.rounds, opts.window
                )
                for name, results in got.items():
                    rows[(rpc, inflight, per_call)][name] += results
        finally:
            for p in procs.values():
                p.stop()
    for (rpc, inflight, per_call), by_side in rows.items():
        alternating.report(by_side, rpc, inflight, per_call, BASE, TREE)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="HEAD", help="a git revision (default: HEAD)")
    ap.add_argument("--reuse", action="store_true", help="decision reuse on (default off)")
    ap.add_argument("--rounds", type=int, default=6, help="alternating windows per row and start")
    ap.add_argument("--window", type=float, default=1.0, help="seconds per window")
    ap.add_argument("--restarts", type=int, default=2, help="starts of the pair, order swapped")
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    opts = ap.parse_args()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with (
        checkout(opts.baseline, "revision-bench-") as (rev, base),
        tempfile.TemporaryDirectory(prefix="revision-bench-logs-") as tmp,
    ):
        print(
            f"revision bench: the working tree ({'with' if dirty else 'no'} uncommitted "
            f"changes) vs {rev}, {opts.restarts} starts x {opts.rounds} alternating windows of "
            f"{opts.window:g} s per row, reuse {'on' if opts.reuse else 'off'}, "
            f"{opts.memories} memories, load average {gb._loadavg()}"
        )
        asyncio.run(compare(opts, base, Path(tmp)))
        print(f"load average after the run: {gb._loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

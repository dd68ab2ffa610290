"""The sidecar on its two gRPC runtimes, side by side (prints figures, asserts
nothing; not a timed test).

Two sidecars, `memlineage serve --grpc-runtime sync` and `--grpc-runtime aio`, each
in a process of its own, started alike (embedded store, bundled policies, reuse off
unless ``--reuse``: every decision fresh; decision log off; metrics on, as
``grpc_bench.py`` starts them), each loaded with ``grpc_bench.py``'s 2,000
memories. They are measured in alternating windows (what else runs on the machine
weighs on both alike) with ``grpc_bench.py``'s client: Check at 32 calls in flight,
FilterRank x100 at 32, and Check at one call in flight; printed per runtime with
server and client CPU per call, then the ratio aio / sync of each round and its
median (`alternating.py`). The figure to set the default `grpc_runtime` by.

    .venv/bin/python bench/runtime_bench.py
    .venv/bin/python bench/runtime_bench.py --rounds 10 --window 1 --reuse
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

import alternating  # noqa: E402
import grpc_bench as gb  # noqa: E402

REUSE_OFF = "# runtime_bench: every decision fresh\nreuse_decisions = false\n"


async def compare(opts: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="runtime-bench-"))
    config = None
    if not opts.reuse:
        config = tmp / "reuse-off.toml"
        config.write_text(REUSE_OFF)
    procs = {
        name: gb.launch_sidecar(tmp, "embedded", "off", f"sidecar-{name}", config, name)
        for name in ("sync", "aio")
    }
    try:
        workloads = {
            name: await gb.load(p.address, opts.memories, opts.seed) for name, p in procs.items()
        }
        print(
            f"runtime bench: the sidecar on its two gRPC runtimes, {opts.rounds} alternating "
            f"windows of {opts.window:g} s each, reuse {'on' if opts.reuse else 'off'}, "
            f"{opts.memories} memories, load average {gb._loadavg()}"
        )
        await alternating.compare(procs, workloads, opts.rounds, opts.window, "sync", "aio")
    finally:
        for p in procs.values():
            p.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reuse", action="store_true", help="decision reuse on (default off)")
    ap.add_argument("--rounds", type=int, default=6, help="alternating windows per row")
    ap.add_argument("--window", type=float, default=1.0, help="seconds per window")
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    asyncio.run(compare(ap.parse_args()))


if __name__ == "__main__":
    main()

"""gRPC's poller, EventEngine (grpcio's default since 1.80) or the one before it,
side by side (prints figures, asserts nothing; not a timed test).

grpcio 1.80 made its EventEngine the default in Python; ``GRPC_EXPERIMENTS=
-event_engine_client,-event_engine_listener`` in a process's environment, before it
imports grpc, puts that process back on the poller before it (docs/operations.md,
"gRPC's poller"). The choice is the operator's, per process: the sidecar's and the
agent's (the client's) each. This bench measures both sides of it on loopback:

1. **One agent's calls** (what the adapters make: one call at a time, each after the
   agent's own work): a sync `MemLineageClient` in a child process of its own, a
   Health call and a fresh read Check, back to back (hot) and each after 10 ms idle,
   for the four pairings of the client's poller and the sidecar's, in alternating
   rounds. Printed: p50 per pairing and the ratio of each to both on EventEngine.
2. **Many calls in flight** (a sidecar several agents share): two sidecars, one per
   poller, measured in alternating windows with `grpc_bench.py`'s client (grpc.aio on
   EventEngine, the same for both): Check at 32 in flight, FilterRank x100 at 32,
   Check at one in flight (`alternating.py`).

Both sidecars: `memlineage serve`, embedded store, bundled policies, reuse off (every
decision fresh), decision log off, `grpc_bench.py`'s 2,000 memories.

    .venv/bin/python bench/poller_bench.py                 # ~2 min
    .venv/bin/python bench/poller_bench.py --rounds 6 --calls 400
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

import alternating  # noqa: E402
import grpc_bench as gb  # noqa: E402

LEGACY = "-event_engine_client,-event_engine_listener"
"""The `GRPC_EXPERIMENTS` value that puts a process on the poller before EventEngine."""

POLLERS = ("event-engine", "legacy")
REUSE_OFF = "# poller_bench: every decision fresh\nreuse_decisions = false\n"
IDLE = 0.010
SERIES = ("health hot", "health idle", "check hot", "check idle")


def env_for(poller: str) -> dict[str, str]:
    """This process's environment with `poller` set (and an inherited choice removed)."""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    if poller == "legacy":
        env["GRPC_EXPERIMENTS"] = LEGACY
    return env


# ------------------------------------------------------------------ in the child
def child(address: str, ids_file: str, calls: int) -> None:
    """One agent's calls (sync client, this process's poller): p50 ms of each series,
    as one JSON line."""
    from memlineage.client import MemLineageClient

    ids = Path(ids_file).read_text().split()
    out: dict[str, float] = {}
    with MemLineageClient(address, timeout=10) as client:
        for i in range(100):  # warm: the connection, both sides' caches
            client.health()
            client.check("read", ids[i % len(ids)])
        for name in SERIES:
            idle = name.endswith("idle")
            xs = []
            for i in range(calls if not idle else max(20, calls // 4)):
                if idle:
                    time.sleep(IDLE)
                t = time.perf_counter()
                if name.startswith("health"):
                    client.health()
                else:
                    client.check("read", ids[(i * 7919) % len(ids)])
                xs.append((time.perf_counter() - t) * 1e3)
            out[name] = statistics.median(xs)
    print(json.dumps({"experiments": os.environ.get("GRPC_EXPERIMENTS", ""), **out}))


# ------------------------------------------------------------------ the parent
def agent_calls(
    procs: dict[str, gb.ServerProcess], ids_file: Path, rounds: int, calls: int
) -> dict[tuple[str, str], list[dict[str, float]]]:
    """Each (client poller, sidecar poller) pairing's child run `rounds` times, the
    pairings in turn, each round in the other order than the last."""
    pairs = [(c, s) for c in POLLERS for s in POLLERS]
    out: dict[tuple[str, str], list[dict[str, float]]] = {p: [] for p in pairs}
    for k in range(rounds):
        for client_poller, server_poller in pairs if k % 2 == 0 else pairs[::-1]:
            run = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    procs[server_poller].address,
                    str(ids_file),
                    "--calls",
                    str(calls),
                ],
                env=env_for(client_poller),
                capture_output=True,
                text=True,
                timeout=300,
                cwd=REPO,
            )
            if run.returncode != 0:
                sys.exit(f"the client child failed:\n{run.stderr[-3000:]}")
            found = json.loads(run.stdout.splitlines()[-1])
            if found.pop("experiments") != env_for(client_poller).get("GRPC_EXPERIMENTS", ""):
                sys.exit(f"the {client_poller} client child ran on another poller")
            out[(client_poller, server_poller)].append(found)
    return out


def report_agent(results: dict[tuple[str, str], list[dict[str, float]]]) -> None:
    base = ("event-engine", "event-engine")
    print(
        "\n1. one agent's calls (sync client, one call at a time): p50 ms, the median of the "
        "rounds' p50s; (x): / both on EventEngine"
    )
    print(f"  {'client':13} {'sidecar':13} " + " ".join(f"{s:>19}" for s in SERIES))
    med = {p: {s: statistics.median(r[s] for r in rs) for s in SERIES} for p, rs in results.items()}
    for (c, s), m in med.items():
        cells = " ".join(f"{m[n]:>10.3f} ({m[n] / med[base][n]:4.2f}x)" for n in SERIES)
        print(f"  {c:13} {s:13} {cells}")
    both = med[("legacy", "legacy")]
    print(
        "  both on the legacy poller, against both on EventEngine: fresh Check "
        f"{med[base]['check hot']:.3f} -> {both['check hot']:.3f} ms back to back, "
        f"{med[base]['check idle']:.3f} -> {both['check idle']:.3f} ms after {IDLE * 1e3:g} ms "
        f"idle; Health {med[base]['health hot']:.3f} -> {both['health hot']:.3f} ms, "
        f"{med[base]['health idle']:.3f} -> {both['health idle']:.3f} ms"
    )


async def compare(opts: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="poller-bench-"))
    config = tmp / "reuse-off.toml"
    config.write_text(REUSE_OFF)
    procs: dict[str, gb.ServerProcess] = {}
    try:
        for name in POLLERS:
            procs[name] = gb.launch_sidecar(
                tmp, "embedded", "off", f"sidecar-{name}", config, env=env_for(name)
            )
        for name, p in procs.items():  # each sidecar runs on the poller it is named for
            environ = Path(f"/proc/{p.proc.pid}/environ").read_bytes().split(b"\0")
            named = [e.decode() for e in environ if e.startswith(b"GRPC_EXPERIMENTS=")]
            if named != [f"GRPC_EXPERIMENTS={LEGACY}"] * (name == "legacy"):
                sys.exit(f"the {name} sidecar's environment names {named or 'no experiments'}")
            print(f"sidecar {name}: {named[0] if named else 'GRPC_EXPERIMENTS unset'}")
        workloads = {
            name: await gb.load(p.address, opts.memories, opts.seed) for name, p in procs.items()
        }
        ids_file = tmp / "ids.txt"
        ids_file.write_text("\n".join(workloads[POLLERS[0]].ids))
        assert workloads[POLLERS[0]].ids == workloads[POLLERS[1]].ids  # the same memories
        print(
            f"poller bench: gRPC's EventEngine (grpcio's default) vs the poller before it "
            f"(GRPC_EXPERIMENTS={LEGACY}); sidecars on the embedded store, reuse off, "
            f"{opts.memories} memories; {opts.rounds} alternating rounds; load average "
            f"{gb._loadavg()}"
        )
        report_agent(agent_calls(procs, ids_file, opts.rounds, opts.calls))
        print(
            "\n2. many calls in flight: the sidecar's poller alone (the bench's grpc.aio "
            f"client on EventEngine for both), {opts.rounds} alternating windows of "
            f"{opts.window:g} s"
        )
        await alternating.compare(
            procs, workloads, opts.rounds, opts.window, "event-engine", "legacy"
        )
    finally:
        for p in procs.values():
            p.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4, help="alternating rounds per part")
    ap.add_argument("--calls", type=int, default=300, help="hot calls per series and round")
    ap.add_argument("--window", type=float, default=1.0, help="seconds per window (part 2)")
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--child", nargs=2, metavar=("ADDRESS", "IDS"), help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child:
        child(opts.child[0], opts.child[1], opts.calls)
        return
    asyncio.run(compare(opts))


if __name__ == "__main__":
    main()

"""Benches run to the end in a tiny configuration (nothing about speed is asserted;
this only keeps them from rotting: a stricter validation once broke the store bench's
Redis memory rows, unnoticed until a full run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_bench(script: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """`bench/<script> args...` run to its end, which must be a success."""
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def test_store_bench_runs_every_backend_to_the_end() -> None:
    out = run_bench(
        "store_bench.py",
        *("--descendants", "200", "--records", "100", "--restart-records", "200"),
        *("--replay-records", "50", "--review-sizes", "100,200", "--claim-values", "20"),
    )
    for backend in ("embedded", "sqlite", "redis"):
        assert f"== {backend} (" in out.stdout
    assert out.stdout.count("revoke root with 200 descendants") == 3
    assert "restart from the snapshot" in out.stdout
    assert "used_memory per record" in out.stdout  # the last Redis row


def test_the_grpc_bench_shadow_candidate_is_one_the_sidecar_loads(tmp_path: Path) -> None:
    """`grpc_bench.py` serves a shadow candidate (the bundled set plus SHADOW_RULE): it
    must pass the set's own tests, or the sidecar refuses to start and the default run
    dies at the shadow row (it did once, after a bundled test began to name the web
    tools the rule denied)."""
    import shutil

    sys.path.insert(0, str(REPO / "bench"))
    try:
        from grpc_bench import POLICIES, SHADOW_RULE
    finally:
        sys.path.remove(str(REPO / "bench"))
    from memlineage.engine.policies import PolicyHolder

    candidate = tmp_path / "candidate"
    shutil.copytree(POLICIES, candidate)
    (candidate / "zz_shadow.mlp").write_text(SHADOW_RULE)
    serving, diagnostics = PolicyHolder.candidate(str(candidate))
    assert serving is not None, [d.message for d in diagnostics]
    assert [p.name for p in serving.compiled.policies if p.name.startswith("no_browser")]


def test_decision_log_bench_prints_every_row() -> None:
    out = run_bench("decision_log_bench.py", "--checks", "400", "--rounds", "1")
    rows = ("log off", "log to a file", "log to a pipe (the default: stderr)", "one lock")
    for row in rows:
        assert out.stdout.count(f"{row} ") == 2, out.stdout  # 1 and 4 threads


def test_runtime_bench_serves_both_runtimes_to_the_end() -> None:
    """Both sidecars (`--grpc-runtime sync` and `aio`) start, load and answer every row."""
    out = run_bench(
        "runtime_bench.py", "--rounds", "1", "--window", "0.2", "--memories", "200", timeout=180
    )
    rows = [line.split()[0] for line in out.stdout.splitlines() if line.endswith("us/call")]
    assert rows == ["sync", "aio"] * 3, out.stdout
    assert "aio / sync p50: median round" in out.stdout


def test_revision_bench_runs_the_baseline_revision_beside_the_tree() -> None:
    """The baseline sidecar runs the checked-out revision's code (the bench refuses to
    go on otherwise), the pair starts twice in both orders, every row compares them,
    and the temporary worktree is gone afterwards."""
    out = run_bench(
        "revision_bench.py",
        *("--baseline", "HEAD", "--rounds", "1", "--window", "0.2", "--memories", "200"),
        timeout=240,
    )
    assert out.stdout.count("baseline imports") == 1 and "/baseline/server/" in out.stdout
    rows = [line.split()[0] for line in out.stdout.splitlines() if line.endswith("us/call")]
    assert rows == ["baseline", "tree"] * 3, out.stdout
    assert out.stdout.count("tree / baseline") == 3, out.stdout
    worktrees = subprocess.run(
        ["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert "revision-bench-" not in worktrees


def test_integrations_bench_prints_every_row_and_both_target_lines() -> None:
    """Every op of both adapters against its bare store, the floor, the target line on
    the issue's ops and the line listing every row over 1 ms (real LangGraph, Mem0
    offline and a sidecar, a few ops each)."""
    out = run_bench("integrations_bench.py", "--items", "20", "--mem0-items", "4", timeout=180)
    lines = out.stdout.splitlines()
    rows = [(line[:9].strip(), line[10:17].strip()) for line in lines[1:] if line[:9].strip()]
    lg = ("put", "update", "update*", "get", "get x10", "search", "search*", "search~")
    mem0 = ("add", "update", "update*", "search", "search*", "search~")
    assert rows[: len(lg) + len(mem0)] == [
        *(("langgraph", op) for op in lg),
        *(("mem0", op) for op in mem0),
    ], out.stdout
    assert out.stdout.count("floor: one Health round trip") == 2
    for system in ("langgraph", "mem0"):
        fresh = next(line for line in lines if line.startswith(f"{system:9} search~"))
        assert "calls/op: FilterRank 1; every decision fresh" in fresh, fresh
    named = (
        "langgraph put, langgraph get, langgraph search, langgraph search~, mem0 add, "
        "mem0 search, mem0 search~"
    )
    target = next(line for line in lines if line.startswith("target: "))
    assert f"(the issue's: {named}) -> worst " in target, target
    assert any(line.startswith("every row: ") for line in lines), out.stdout


def test_grpc_bench_runs_its_servers_on_the_cpus_it_is_given() -> None:
    """`--server-cpus`: the sidecar (its `cpu_affinity`, from the environment the bench
    sets) and the bare ceilings start on those CPUs, the client runs on the others,
    and the header says so. The fresh FilterRank row sets its handler beside the same
    calls timed in one process (hot, then on flushed caches)."""
    import os

    from memlineage.config.kinds import format_cpus

    cpus = sorted(os.sched_getaffinity(0))
    out = run_bench(
        "grpc_bench.py",
        *("--rows", "latency,fresh-fr", "--backends", "embedded", "--memories", "100"),
        *("--duration", "0.3", "--warmup", "0.1", "--rounds", "0"),
        *("--server-cpus", str(cpus[-1])),
    )
    where = [x for x in out.stdout.splitlines() if x.startswith("where a fresh FilterRank")]
    assert len(where) == 1 and "nan" not in where[0], out.stdout
    assert "after 8 MB" in where[0] and "after 64 MB" in where[0], where
    assert "the hot loop plus the rest of the server CPU" in where[0], where
    assert f"servers pinned to CPUs {cpus[-1]}, this client to {format_cpus(cpus[:-1])}" in (
        out.stdout
    )
    assert "target: p50 at one call in flight <= 1.2x" in out.stdout, out.stdout


def test_grpc_bench_sets_each_variant_against_a_twin_started_with_it() -> None:
    """The shadow, views and workers rows compare a sidecar with a setting against a
    twin on the defaults, both started for the row (a sidecar that served the rows
    before ran slower than one started after it): each prints its line."""
    out = run_bench(
        "grpc_bench.py",
        *("--rows", "shadow,views,workers", "--backends", "embedded", "--memories", "100"),
        *("--duration", "0.2", "--warmup", "0.1", "--rounds", "1"),
    )
    lines = out.stdout.splitlines()
    twin = "beside a twin without it, both started for the row"
    assert any(twin in x for x in lines), out.stdout
    assert any(x.startswith("target: Check with a shadow candidate loaded") for x in lines)
    assert any(x.startswith("kept views (engine/view_cache.py): fresh Check") for x in lines)
    workers = [x for x in lines if x.startswith("grpc_workers (embedded, reuse off)")]
    assert len(workers) == 3, out.stdout


def test_grpc_bench_stack_row_serves_a_spinning_check_in_the_sidecars_server() -> None:
    """The stack row starts `memlineage serve` with its Check replaced by a spin (code
    of the bench's own, run with `-c`): it serves, and its line sets it beside the
    bare servicer spinning as long and beside the fresh sidecar, with figures."""
    out = run_bench(
        "grpc_bench.py",
        *("--rows", "stack", "--backends", "embedded", "--memories", "100"),
        *("--duration", "0.2", "--warmup", "0.1", "--rounds", "1"),
    )
    line = [x for x in out.stdout.splitlines() if x.startswith("the server around the handler")]
    assert len(line) == 1 and "nan" not in line[0], out.stdout
    assert "what deciding costs beyond the handler's length" in line[0]
    rows = [x for x in out.stdout.splitlines() if x.startswith("sidecar, every decision fresh")]
    assert rows and rows[0][-2:] == " 0", rows  # the fresh row ran, with no errors


def test_poller_bench_runs_each_side_on_the_poller_it_names() -> None:
    """Each sidecar and each client child on its own poller (the bench reads the
    sidecars' environment and the children report theirs; it stops on a mismatch),
    the four pairings and every in-flight row printed."""
    out = run_bench(
        "poller_bench.py",
        *("--rounds", "1", "--calls", "20", "--window", "0.2", "--memories", "200"),
        timeout=180,
    )
    assert "sidecar event-engine: GRPC_EXPERIMENTS unset" in out.stdout, out.stdout
    legacy = "sidecar legacy: GRPC_EXPERIMENTS=-event_engine_client,-event_engine_listener"
    assert legacy in out.stdout, out.stdout
    pollers = ("event-engine", "legacy")
    pairings = [
        line.split()[:2]
        for line in out.stdout.splitlines()
        if line.split()[:2] and all(w in pollers for w in line.split()[:2])
    ]
    assert pairings == [[c, s] for c in pollers for s in pollers], out.stdout
    rows = [line.split()[0] for line in out.stdout.splitlines() if line.endswith("us/call")]
    assert rows == ["event-engine", "legacy"] * 3, out.stdout

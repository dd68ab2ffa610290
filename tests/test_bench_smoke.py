"""The store bench runs to the end in a tiny configuration (it asserts nothing about
speed; this only keeps it from rotting: a stricter validation once broke its Redis
memory rows, unnoticed until a full run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_store_bench_runs_every_backend_to_the_end() -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "store_bench.py"),
            *("--descendants", "200", "--records", "100", "--restart-records", "500"),
            *("--replay-records", "100", "--review-sizes", "1000,2000"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    for backend in ("embedded", "sqlite", "redis"):
        assert f"== {backend} (" in out.stdout
    assert out.stdout.count("revoke root with 200 descendants") == 3
    assert "restart from the snapshot" in out.stdout
    assert "used_memory per record" in out.stdout  # the last Redis row

"""The client suites' `served` fixture: `memlineage serve` as a process the fault tests
pause, kill and start again on the same port and data directory."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.redis_servers import free_port
from support.serve_process import ServeProcess
from support.sidecar import BUNDLED_POLICIES


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[list[str], list[ServeProcess]]]:
    """`memlineage serve` args for a fixed port and data directory (no background
    sweep), and the processes started with them (continued and killed at the end)."""
    args = [
        "--policies",
        BUNDLED_POLICIES,
        "--data-dir",
        str(tmp_path / "data"),
        "--listen",
        f"127.0.0.1:{free_port()}",
        "--sweep-interval",
        "0",
    ]
    procs: list[ServeProcess] = []
    yield args, procs
    for p in procs:
        if p.proc.poll() is None:
            os.kill(p.proc.pid, signal.SIGCONT)
            p.kill()

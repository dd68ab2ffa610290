"""Both clients against a real `memlineage serve` process under faults a caller meets:
a sidecar back after a long outage (its calls reach it within their deadline, not
minutes later), a client closed with calls and a Watch in flight (they fail with
the sync client's error; the tasks reading them are not reported cancelled), and a
call on a closed client (the same RuntimeError from both clients)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from memlineage.client import (
    DeadlineExceeded,
    MemLineageClient,
)
from support.redis_servers import free_port
from support.serve_process import ServeProcess
from support.sidecar import BUNDLED_POLICIES


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[list[str], list[ServeProcess]]]:
    """`memlineage serve` args for a fixed port and data directory, and the processes
    started with them (continued and killed at the end)."""
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


def _address(args: list[str]) -> str:
    return args[args.index("--listen") + 1]


# ---------------------------------------------------------------- a long outage


def test_a_sidecar_back_after_a_long_outage_is_reached_within_the_calls_deadline(
    served: tuple,
) -> None:
    """No sidecar for 16 s while the client keeps calling (each call waits its 2.5 s
    and fails), then one starts on that port: the next call is answered. Before, the
    channel's reconnect backoff (gRPC's default: 1 s growing 1.6x up to 120 s) had
    grown to ~10 s, so calls made while the sidecar was up again failed with
    "the sidecar ... was never reachable" until the next attempt, up to 2 minutes
    after a long outage."""
    args, procs = served
    with MemLineageClient(_address(args), timeout=2.5) as client:
        began = time.monotonic()
        while time.monotonic() - began < 16:
            with pytest.raises(DeadlineExceeded, match="never reachable"):
                client.health()
        procs.append(ServeProcess(args))
        answered = time.monotonic()
        assert client.health() == "SERVING"
        assert time.monotonic() - answered < 2.5

"""Run a real sidecar on a free loopback port in a thread.

Tests talk to it over the network through the client; its clock is injected
(a ManualClock) so time-dependent scenarios never sleep.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memlineage.client import MemLineageClient
from memlineage.config import Config
from memlineage.lineage.clock import Clock, ManualClock
from memlineage.sidecar import Sidecar, start_sidecar
from memlineage.store import LineageStore
from prometheus_client import generate_latest

from support.memories import T0

REPO = Path(__file__).resolve().parents[2]
BUNDLED_POLICIES = str(REPO / "policies")
RUNTIME_VARIABLE = "MEMLINEAGE_GRPC_RUNTIME"
"""The setting's own variable: set (to `aio`), every sidecar the tests start serves on
that runtime, in this process and in the ones they start (`memlineage serve` reads it);
the test command runs the served tests once more so (scripts/test.sh)."""


class RunningSidecar:
    """`with RunningSidecar(config, clock) as s:` -> s.address, s.sidecar, s.clock."""

    def __init__(
        self, config: Config | None = None, clock: Clock | None = None, *, pinned: bool = False
    ) -> None:
        """`pinned`: serve on the config's `grpc_runtime` whatever RUNTIME_VARIABLE says
        (tests of one runtime's own machinery)."""
        base = config or Config(policy_dir=BUNDLED_POLICIES)
        runtime = base.grpc_runtime if pinned else os.environ.get(RUNTIME_VARIABLE)
        self.config = replace(
            base,
            listen="127.0.0.1:0",
            decision_log=base.decision_log if config else "off",
            grpc_runtime=runtime or base.grpc_runtime,
        )
        self.clock = clock or ManualClock(T0)
        self.loop = asyncio.new_event_loop()
        self.sidecar: Sidecar | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    @property
    def address(self) -> str:
        assert self.sidecar is not None
        return f"127.0.0.1:{self.sidecar.port}"

    def __enter__(self) -> RunningSidecar:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            start_sidecar(self.config, clock=self.clock), self.loop
        )
        self.sidecar = future.result(timeout=30)
        return self

    def pool_threads(self, pool: str) -> int:
        """Threads of the gRPC pool `pool` (`memlineage-grpc`, `memlineage-watch`, ...), as
        the metrics endpoint exports them: the same names on either runtime."""
        assert self.sidecar is not None
        text = generate_latest(self.sidecar.metrics.registry).decode()
        found = re.search(rf'memlineage_grpc_threads\{{pool="{pool}"\}} (\d+)', text)
        assert found is not None, text
        return int(found.group(1))

    def served(self, method: str) -> int:
        """Calls of the RPC `method` (`Check`, `FilterRank`, ...) the sidecar has served:
        its own latency histogram's count."""
        assert self.sidecar is not None
        count = self.sidecar.metrics.registry.get_sample_value(
            "memlineage_rpc_latency_seconds_count", {"method": method}
        )
        return int(count or 0)

    def __exit__(self, *exc: object) -> None:
        if self.sidecar is not None:
            asyncio.run_coroutine_threadsafe(self.sidecar.stop(0.2), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@dataclass
class World:
    """A running sidecar, its clock, and clients for two tenants and an admin."""

    sidecar: RunningSidecar
    clock: ManualClock
    alice: MemLineageClient
    bob: MemLineageClient
    admin: MemLineageClient

    @property
    def now(self) -> float:
        return self.clock()


STORES = ("embedded", "redis", "cluster")
"""The stores a test runs on when it takes each (`store_url`)."""


def store_url(kind: str, request: Any, tmp_path: Path) -> str:
    """An empty store of `kind` (one of `STORES`) for one test: a data directory under
    `tmp_path`, or the session's Redis or Redis Cluster emptied (pytest's `request`
    gives the session fixtures)."""
    if kind == "embedded":
        return f"embedded://{tmp_path / 'data'}"
    return str(
        request.getfixturevalue(
            {"redis": "redis_server", "cluster": "redis_cluster"}[kind]
        ).emptied()
    )


def store_of(s: RunningSidecar) -> LineageStore:
    """The store a running in-process sidecar serves from (to check it directly)."""
    assert s.sidecar is not None
    return s.sidecar.store

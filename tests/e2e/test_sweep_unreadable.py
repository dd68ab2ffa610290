"""RunSweep's `unreadable`, through a real `memlineage serve` over a real redis-server:
a memory whose record hash is damaged (written with redis-py) is skipped by the pass
and its DATA_LOSS message (naming the key and the field) is in the response, while the
other memories are examined; the background sweep's log line counts it. Before, the
response had no such field: the skipped memory was only in the server's log."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
import redis
from memlineage.client import MemLineageClient
from memlineage.lifecycle.sweep import SweepReport
from memlineage.sidecar import _sweep_forever
from support.redis_servers import RedisServer, start_redis_server
from support.serve_process import ServeProcess
from support.sidecar import BUNDLED_POLICIES


@pytest.fixture
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[redis.Redis, ServeProcess]]:
    server: RedisServer = start_redis_server(tmp_path_factory.mktemp("redis-sweep-unreadable"))
    try:
        # no tokens: namespace `default`, admin RPCs from loopback
        sidecar = ServeProcess(["--store", server.url, "--policies", BUNDLED_POLICIES])
        raw = server.client(socket_timeout=5)
        try:
            yield raw, sidecar
        finally:
            raw.close()
            assert sidecar.proc.poll() is None, "the sidecar died"
            sidecar.stop()
    finally:
        server.stop()


def test_run_sweep_lists_what_it_could_not_read(served: tuple[redis.Redis, ServeProcess]) -> None:
    raw, sidecar = served
    with MemLineageClient(sidecar.address, timeout=10, retries=0) as c:
        assert c.record("fine", creator="agent:planner").recorded
        assert c.record("broken", creator="agent:planner").recorded
    key = "ml:{default}:m:broken"
    raw.hset(key, "f", b"high")
    raw.zadd("ml:{default}:rv", {"fine": 0, "broken": 0})  # both due for review now
    with MemLineageClient(sidecar.address, timeout=10, retries=0) as c:
        report = c.run_sweep(namespace="default")
    assert len(report.unreadable) == 1, report
    message = report.unreadable[0]
    assert message.startswith(f"redis {key} cannot be read: "), message
    assert "field 'f' (creator_confidence)" in message, message
    assert report.examined >= 1
    assert raw.hget(key, "f") == b"high"  # skipped, untouched


def test_the_background_sweep_counts_what_it_could_not_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The sidecar's sweep loop logs a pass that skipped something (at INFO, as its
    other passes; each skipped value is logged at ERROR by the sweep itself)."""
    report = SweepReport(examined=3, unreadable=["redis ml:{x}:m:a cannot be read: ..."])

    class Engine:
        def sweep(self, batch: int) -> SweepReport:
            return report

    async def run() -> None:
        task = asyncio.create_task(_sweep_forever(Engine(), 0.01, 10))  # type: ignore[arg-type]
        for _ in range(200):
            await asyncio.sleep(0.01)
            if caplog.records:
                break
        task.cancel()

    with caplog.at_level(logging.INFO, logger="memlineage"):
        asyncio.run(run())
    assert "sweep: examined 3, 0 transitions, 0 refused, 1 unreadable" in caplog.messages[0]

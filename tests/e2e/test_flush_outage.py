"""The sidecar's background flush while its Redis is down (SIGKILL, then restarted on
its data): what it retries every round (a kept decision, access statistics read before
the outage) is neither lost nor logged every round — one ERROR when the outage starts,
one INFO once a round writes to the store again, never while it is down — and it is in
the store afterwards."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from memlineage import sidecar
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.store import open_store
from memlineage_dsl.facts import Creator
from support.memories import T0
from support.redis_servers import start_redis_server
from support.sidecar import BUNDLED_POLICIES

ALICE = Creator("user", "user:alice")


async def _outage(engine: Engine, counted: list[int], back: Callable[[], object]) -> None:
    """The sidecar's flush loop (every 20 ms): 6 rounds with the store down, then `back`
    and 3 more rounds."""
    task = asyncio.create_task(sidecar._flush_forever(engine, 0.02, 0))
    try:
        async with asyncio.timeout(60):
            while len(counted) < 6:
                await asyncio.sleep(0.01)
            back()
            done = len(counted)
            while len(counted) < done + 3:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()


def test_an_outage_is_logged_once_and_its_end_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = start_redis_server(tmp_path / "redis")
    store = open_store(server.url, clock=ManualClock(T0))
    try:
        engine = Engine(store, PolicyHolder(BUNDLED_POLICIES), clock=ManualClock(T0))
        engine.record(MemoryRecord(id="m", namespace="ns", creator_id="user:alice"), ALICE)
        engine.check("ns", "read", ["m"], ALICE)
        assert engine.flush_decisions() == 2  # the Record's and the Check's
        issued = engine.check("ns", "read", ["m"], ALICE).decision_id
        counted: list[int] = []
        real = sidecar.flush

        def counting(e: Engine, compact: int) -> int:  # the real flush, its rounds counted
            counted.append(1)
            return real(e, compact)

        monkeypatch.setattr(sidecar, "flush", counting)
        server.stop(hard=True)
        down: list[tuple[str, str]] = []

        def back() -> None:  # the outage's log lines, then the server back on its data
            assert engine.decisions.pending() == 1  # kept for the next round, every round
            down.extend((r.levelname, r.getMessage()) for r in caplog.records)
            caplog.clear()
            server.start()

        with caplog.at_level(logging.INFO, "memlineage"):
            asyncio.run(_outage(engine, counted, back))
        assert [level for level, m in down if "background flush" in m] == ["ERROR"], down
        said = [(r.levelname, r.getMessage()) for r in caplog.records]
        assert said == [("INFO", "background flush goes through again")], said
        assert engine.decisions.pending() == 0
        assert store.kept_decision("ns", issued) is not None
    finally:
        store.close()
        server.stop(hard=True)


def test_reads_before_an_outage_are_written_after_it_and_its_end_said_only_then(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only access statistics are pending when Redis dies (the decisions were written):
    the first round fails and keeps them; the rounds after it have them to write, so
    none of them claims the store answers until it does. Before: the failed round
    dropped the reads, and the next one, with nothing to write, logged the end of an
    outage that was still on."""
    server = start_redis_server(tmp_path / "redis")
    store = open_store(server.url, clock=ManualClock(T0))
    try:
        engine = Engine(store, PolicyHolder(BUNDLED_POLICIES), clock=ManualClock(T0))
        engine.record(MemoryRecord(id="m", namespace="ns", creator_id="user:alice"), ALICE)
        for _ in range(3):
            engine.check("ns", "read", ["m"], ALICE)
        engine.flush_decisions()
        assert engine.decisions.pending() == 0 and engine.access.pending() == 3
        counted: list[int] = []
        real = sidecar.flush

        def counting(e: Engine, compact: int) -> int:
            counted.append(1)
            return real(e, compact)

        monkeypatch.setattr(sidecar, "flush", counting)
        server.stop(hard=True)
        down: list[tuple[str, str]] = []

        def back() -> None:
            assert engine.access.pending() == 1  # one memory's summed reads, kept
            down.extend((r.levelname, r.getMessage()) for r in caplog.records)
            caplog.clear()
            server.start()

        with caplog.at_level(logging.INFO, "memlineage"):
            asyncio.run(_outage(engine, counted, back))
        assert [(level, "background flush" in m) for level, m in down] == [("ERROR", True)], down
        said = [(r.levelname, r.getMessage()) for r in caplog.records]
        assert said == [("INFO", "background flush goes through again")], said
        assert engine.access.pending() == 0
        assert store.get("ns", "m").access_count == 3
    finally:
        store.close()
        server.stop(hard=True)

"""A Watch over a connection that went silent (a partition, a vanished host: bytes
taken, never answered) ends and resumes from its cursor, through the client's
keepalive pings (`retry.KEEPALIVE_SECONDS`): before, the stream waited for ever,
missing every event after. Against a real sidecar, through a real TCP relay."""

from __future__ import annotations

import queue
import threading

import pytest
from memlineage.client import MemLineageClient, retry
from support.blackhole import Blackhole
from support.sidecar import RunningSidecar


def test_channels_ping_while_a_call_is_open() -> None:
    options = dict(retry.channel_options(3))
    assert options["grpc.keepalive_time_ms"] == int(retry.KEEPALIVE_SECONDS * 1000)
    timeout_ms = int(retry.KEEPALIVE_TIMEOUT_SECONDS * 1000)
    assert options["grpc.keepalive_timeout_ms"] == timeout_ms
    assert options["grpc.http2.ping_timeout_ms"] == timeout_ms
    assert options["grpc.http2.max_pings_without_data"] == 0
    assert "grpc.keepalive_permit_without_calls" not in options  # idle channels: no pings


def test_a_watch_over_a_silent_connection_resumes_from_its_cursor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the product's pings, faster (the defaults would make this test take ~30 s)
    monkeypatch.setattr(retry, "KEEPALIVE_SECONDS", 1.0)
    monkeypatch.setattr(retry, "KEEPALIVE_TIMEOUT_SECONDS", 1.0)
    seen: queue.Queue[str] = queue.Queue()
    with (
        RunningSidecar() as sidecar,
        Blackhole(sidecar.address) as hole,
        MemLineageClient(sidecar.address, timeout=5) as direct,
        MemLineageClient(f"127.0.0.1:{hole.port}", timeout=5) as watcher,
    ):
        direct.record("m1", creator="user:alice")
        stream = watcher.watch(from_oldest=True)

        def follow() -> None:
            for event in stream:
                seen.put(event.memory_id)

        threading.Thread(target=follow, daemon=True).start()
        try:
            assert seen.get(timeout=10) == "m1"
            hole.cut()  # the open connection now takes bytes and answers nothing
            direct.record("m2", creator="user:alice")
            assert seen.get(timeout=20) == "m2"  # detected, reconnected, resumed
            assert seen.empty()  # m1 not delivered again
        finally:
            stream.cancel()

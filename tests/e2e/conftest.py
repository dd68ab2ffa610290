"""A real sidecar on a loopback port, on the embedded store and on a real Redis,
with two tenants and an admin token; tests talk to it through the client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from memlineage.client import MemLineageClient
from memlineage.config import Config
from memlineage.grpc_api.auth import TokenGrant
from memlineage.lineage.clock import ManualClock
from support.memories import T0
from support.redis_servers import RedisServer, start_redis_server
from support.sidecar import BUNDLED_POLICIES, RunningSidecar, World

TOKENS = (
    TokenGrant("token-alice", ("user-a",), name="alice"),
    TokenGrant("token-bob", ("user-b",), name="bob"),
    TokenGrant("token-admin", (), admin=True, name="ops"),
)


@pytest.fixture(params=["embedded", "redis"])
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    store = "embedded"
    if request.param == "redis":
        store = request.getfixturevalue("redis_server").emptied()
    config = Config(policy_dir=BUNDLED_POLICIES, store=store, tokens=TOKENS, decision_log="off")
    clock = ManualClock(T0)
    with RunningSidecar(config, clock) as sidecar:
        clients = [
            MemLineageClient(sidecar.address, token=t, timeout=10)
            for t in ("token-alice", "token-bob", "token-admin")
        ]
        try:
            yield World(sidecar, clock, *clients)
        finally:
            for c in clients:
                c.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of the test's own (AOF, appendfsync always), for the tests that
    SIGKILL or SIGSTOP it; stopped (continued first, if paused) at the end."""
    server = start_redis_server(tmp_path / "redis")
    try:
        yield server
    finally:
        server.stop()

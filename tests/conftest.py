"""Session-wide real Redis servers (standalone with AOF, and a 3-master cluster).

They start on free loopback ports in temporary directories the first time a
test asks for them and stop at the end of the session.  A missing redis-server
fails the tests that need it with an install hint; nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.redis_servers import (
    RedisClusterHandle,
    RedisServer,
    start_redis_cluster,
    start_redis_server,
)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A standalone redis-server with AOF on (appendfsync always)."""
    server = start_redis_server(tmp_path_factory.mktemp("redis-standalone"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterHandle]:
    """A three-master Redis Cluster built with redis-cli --cluster create."""
    cluster = start_redis_cluster(tmp_path_factory.mktemp("redis-cluster"), masters=3)
    yield cluster
    cluster.stop()

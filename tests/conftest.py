"""Session-wide real Redis servers (standalone with AOF, and a 3-master cluster).

They start on free loopback ports in temporary directories the first time a
test asks for them and stop at the end of the session.  A missing redis-server
fails the tests that need it with an install hint; nothing is skipped.
"""

from __future__ import annotations

import os
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


# Under pytest-xdist (scripts/test.sh: --dist loadfile --no-loadscope-reorder) a file
# runs whole on one worker, and files are handed out in collection order as workers
# free up. The files that take longest (seconds on two workers, as measured) are
# collected first: the last file to start is then a short one, and no worker waits
# alone at the end for a long one the other could have shared the time with. Within
# a file the order stays as written; a file not named here keeps its place after them.
LONGEST_FILES_FIRST = (
    "tests/test_bench_smoke.py",  # ~115 s
    "tests/dsl/test_limits.py",  # ~35 s
    "tests/e2e/test_serve_cli.py",  # ~30 s
    "tests/e2e/test_replay.py",  # ~28 s
    "tests/e2e/test_redis_faults.py",  # ~27 s
    "tests/e2e/test_embedded_durability.py",  # ~20 s
    "tests/scoring/test_scoring_properties.py",  # ~19 s
    "tests/engine/test_reuse_differential.py",  # ~19 s
    "tests/test_simulate_fuzz.py",  # ~18 s
    "tests/dsl/test_policy_fuzz.py",  # ~18 s
    "tests/e2e/test_request_errors.py",  # ~18 s
    "tests/e2e/test_grant_faults.py",  # ~17 s
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the order as collected
    rank = {path: i for i, path in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))

"""The ``store`` fixture: every contract test runs on embedded, redis and cluster."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import redis
from memlineage.lineage import ManualClock, StoreLimits
from memlineage.store import LineageStore, open_store
from redis.cluster import RedisCluster
from support.memories import NOW
from support.redis_servers import RedisClusterHandle, RedisServer

BACKENDS = ["embedded", "redis", "cluster"]
LIMITS = StoreLimits(max_dependencies=8, history_length=4)

StoreFactory = Callable[..., LineageStore]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


def _flush(url: str, cluster: bool) -> None:
    if cluster:
        c = RedisCluster.from_url(url.replace("redis+cluster://", "redis://").split(",")[0])
        c.flushall(target_nodes=RedisCluster.PRIMARIES)
    else:
        c = redis.Redis.from_url(url)
        c.flushall()
    c.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_store(
    backend: str,
    request: pytest.FixtureRequest,
    clock: ManualClock,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[StoreFactory]:
    """Build (possibly several) stores of the parametrised backend on an empty database."""
    opened: list[LineageStore] = []
    url = "embedded"
    if backend == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        url = server.url
        _flush(url, cluster=False)
    elif backend == "cluster":
        cluster: RedisClusterHandle = request.getfixturevalue("redis_cluster")
        url = cluster.url
        _flush(url, cluster=True)

    def factory(*, limits: StoreLimits = LIMITS, **options: object) -> LineageStore:
        store = open_store(url, clock=clock, limits=limits, **options)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> LineageStore:
    return make_store()

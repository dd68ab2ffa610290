"""A Redis that lost the store's data (a restart without persistence, a FLUSHALL, a
cluster master back empty) or evicts keys is refused, not served as an empty store
(before: every memory answered NOT_FOUND, a Record into the emptied Redis succeeded
and ping said healthy; an outside audit). See ``memlineage.store.redis_identity``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from memlineage.lineage import MemoryRecord
from memlineage.lineage.errors import StoreUnavailableError
from memlineage.store import LineageStore, open_store
from redis.cluster import key_slot
from support.redis_servers import (
    RedisServer,
    _wait_cluster_ok,
    start_redis_cluster,
    start_redis_server,
)

NS = "ident"


def _mem(memory_id: str, *deps: str, ns: str = NS) -> MemoryRecord:
    return MemoryRecord(id=memory_id, namespace=ns, creator_id="tool:t", dependencies=deps)


@pytest.fixture
def volatile(tmp_path: Path) -> Iterator[RedisServer]:
    """A standalone Redis without persistence: a restart empties it."""
    server = start_redis_server(tmp_path / "volatile", aof=False)
    yield server
    server.stop()


def _refused(store: LineageStore) -> None:
    with pytest.raises(StoreUnavailableError, match="lost the store's data"):
        store.get(NS, "a")
    with pytest.raises(StoreUnavailableError, match="lost the store's data"):
        store.record(_mem("c"))
    assert store.ping() is False


def test_a_redis_restarted_empty_is_refused_not_served(volatile: RedisServer) -> None:
    store = open_store(volatile.url)
    try:
        store.record(_mem("a"))
        store.record(_mem("b", "a"))
        volatile.restart(hard=True)
        _refused(store)
        with volatile.client(decode_responses=True) as raw:
            assert raw.keys(f"*{{{NS}}}*") == []  # nothing written into the empty Redis
    finally:
        store.close()
    reopened = open_store(volatile.url)  # opened again: the store as Redis holds it now
    try:
        reopened.record(_mem("a"))
        assert reopened.ping() is True
    finally:
        reopened.close()


def test_a_flushall_while_serving_is_found_by_the_next_ping(volatile: RedisServer) -> None:
    store = open_store(volatile.url)
    try:
        store.record(_mem("a"))
        with volatile.client() as raw:
            raw.flushall()
        assert store.ping() is False
        _refused(store)
    finally:
        store.close()


def test_a_kept_store_and_a_second_sidecar_are_no_alarm(redis_server: RedisServer) -> None:
    """AOF on: a restart keeps the identity key; a second store adopts the first's."""
    url = redis_server.emptied()
    first, second = open_store(url), open_store(url)
    try:
        first.record(_mem("a"))
        second.record(_mem("b", "a"))
        redis_server.restart(hard=True)
        assert first.get(NS, "b").dependencies == ("a",)
        assert second.get(NS, "a").derivations == ("b",)
        assert first.ping() and second.ping()
    finally:
        first.close()
        second.close()


def test_a_redis_evicting_keys_is_refused_while_it_does(volatile: RedisServer) -> None:
    store = open_store(volatile.url)
    try:
        store.record(_mem("a"))
        with volatile.client() as raw:
            raw.config_set("maxmemory", "100mb")
            raw.config_set("maxmemory-policy", "allkeys-lru")
            raw.client_kill_filter(_type="normal", skipme=True)  # the store reconnects
        with pytest.raises(StoreUnavailableError, match="maxmemory-policy allkeys-lru"):
            store.get(NS, "a")
        assert store.ping() is False
        with volatile.client() as raw:
            raw.config_set("maxmemory-policy", "noeviction")
        assert store.ping() is True
        assert store.get(NS, "a").id == "a"
    finally:
        store.close()


def test_a_cluster_master_back_empty_is_refused(tmp_path: Path) -> None:
    cluster = start_redis_cluster(tmp_path / "cluster")  # no AOF: a restart empties
    try:
        store = open_store(cluster.url)
        spaces = [f"ns{i}" for i in range(6)]
        for ns in spaces:
            store.record(_mem("a", ns=ns))
        slot = key_slot(f"ml:{{{spaces[0]}}}:m:a".encode())
        for server in cluster.servers:
            with redis.Redis(port=server.port) as raw:
                if raw.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot):
                    victim = server
        victim.restart(hard=True)  # same slots (nodes.conf), no keys
        _wait_cluster_ok(cluster.servers)
        with pytest.raises(StoreUnavailableError, match="lost the store's data"):
            store.get(spaces[0], "a")
        assert store.ping() is False
        store.close()
    finally:
        cluster.stop()

"""A connection broken after Redis applied a command, before its reply came back:
the store's client never sends the command again by itself (before: the standalone
client's `Retry` re-sent it, so one call spent a grant's use twice, counted a
feedback twice, and answered a revoke, an update and a grant it had applied with
"revoked to revoked", a version conflict and "already exists"; an outside audit).
The call fails as unavailable, and Redis holds it applied exactly once."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from memlineage.lineage import MemoryRecord
from memlineage.lineage.errors import StoreUnavailableError
from memlineage.store import RedisStore, open_store
from support.grants import user_grant
from support.redis_servers import RedisServer
from support.reply_cut import ReplyCutProxy

NS = "cut"


@pytest.fixture
def cut(redis_server: RedisServer) -> Iterator[tuple[RedisStore, ReplyCutProxy, RedisServer]]:
    proxy = ReplyCutProxy(redis_server.port)
    store = open_store(proxy.url, prefix=f"rl{time.monotonic_ns()}")
    assert isinstance(store, RedisStore)
    try:
        yield store, proxy, redis_server
    finally:
        store.close()
        proxy.close()


def test_a_grant_use_whose_reply_is_lost_is_spent_once(
    cut: tuple[RedisStore, ReplyCutProxy, RedisServer],
) -> None:
    store, proxy, _ = cut
    store.record(MemoryRecord(id="root", namespace=NS, creator_id="user:alice"))
    store.put_grant(user_grant(NS, "g1", uses=5, memory_id="root", expires_in=3600))
    assert store.use_grants(NS, ["g1"])  # the script loaded: the next call is one EVALSHA
    proxy.arm(b"EVALSHA")
    with pytest.raises(StoreUnavailableError):
        store.use_grants(NS, ["g1"])
    assert proxy.cuts == 1
    [g] = store.grants(NS)  # the next call reconnects by itself
    assert g.used == 2  # one use for each call: the lost reply's call applied once


def test_a_revoke_and_a_feedback_whose_replies_are_lost_are_applied_once(
    cut: tuple[RedisStore, ReplyCutProxy, RedisServer],
) -> None:
    store, proxy, _ = cut
    for mid in ("root", "other", "f1"):
        store.record(MemoryRecord(id=mid, namespace=NS, creator_id="tool:fb"))
    store.revoke(NS, "other")
    store.feedback(NS, ["f1"], True)  # each script loaded once
    proxy.arm(b"EVALSHA")
    with pytest.raises(StoreUnavailableError):
        store.revoke(NS, "root", reason="bad")
    assert store.get(NS, "root").status == "revoked"
    proxy.arm(b"EVALSHA")
    with pytest.raises(StoreUnavailableError):
        store.feedback(NS, ["f1"], True)
    assert store.get(NS, "f1").uses_ok == 2
    assert proxy.cuts == 2


def test_a_restarted_redis_is_reconnected_to_without_a_failed_call(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Not sending again does not cost a call after a restart: the pool reconnects a
    connection the server closed before it is used."""
    from support.redis_servers import start_redis_server

    server = start_redis_server(tmp_path_factory.mktemp("restart"))
    try:
        store = open_store(server.url)
        store.record(MemoryRecord(id="a", namespace=NS, creator_id="tool:t"))
        server.restart(hard=False)
        assert store.get(NS, "a").id == "a"
        store.close()
    finally:
        server.stop()

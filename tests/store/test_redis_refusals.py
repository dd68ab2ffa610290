"""Redis refusing a command for its own state, not the data: no good replicas
(`min-replicas-to-write`), a failed background save (`stop-writes-on-bgsave-error`),
another client's script running past `busy-reply-threshold`. Each call is
``StoreUnavailableError`` (UNAVAILABLE to a client, the degraded fail mode's case) and
changes nothing (before: INTERNAL with a traceback, and RecordGrant a false DATA_LOSS
saying the stored grants were damaged; an outside audit)."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from memlineage.lineage import MemoryRecord
from memlineage.lineage.errors import StoreUnavailableError
from memlineage.lineage.grants import GrantRecord
from memlineage.store import RedisStore, open_store
from support.grants import user_grant
from support.redis_servers import RedisServer, start_redis_server

NS = "refused"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    s = start_redis_server(
        tmp_path / "redis", aof=False, extra_args=("--enable-protected-configs", "yes")
    )
    try:
        yield s
    finally:
        s.stop(hard=True)


def _grant(gid: str) -> GrantRecord:
    return user_grant(NS, gid, uses=3, memory_id="base", expires_in=3600)


def _writes(store: RedisStore) -> dict[str, Callable[[], object]]:
    return {
        "record": lambda: store.record(
            MemoryRecord(id="new", namespace=NS, creator_id="tool:t", dependencies=("base",))
        ),
        "revoke": lambda: store.revoke(NS, "base", reason="r"),
        "put_grant": lambda: store.put_grant(
            user_grant(NS, "g2", uses=3, memory_id="base", expires_in=3600)
        ),
        "use_grants": lambda: store.use_grants(NS, ["g1"]),
        "feedback": lambda: store.feedback(NS, ["base"], True),
        "incr_counter": lambda: store.incr_counter(NS, "calls:tool:t"),
    }


def _populated(server: RedisServer) -> tuple[RedisStore, redis.Redis, dict[str, str]]:
    store = open_store(server.url)
    assert isinstance(store, RedisStore)
    store.record(MemoryRecord(id="base", namespace=NS, creator_id="tool:t"))
    store.put_grant(_grant("g1"))
    raw = server.client(decode_responses=True)
    return store, raw, _dump(raw)


def _dump(raw: redis.Redis) -> dict[str, str]:
    return {str(k): str(raw.dump(k)) for k in raw.scan_iter("*")}


def _all_refused(store: RedisStore, raw: redis.Redis, before: dict[str, str]) -> None:
    for name, write in _writes(store).items():
        with pytest.raises(StoreUnavailableError, match="redis refused the command"):
            write()
        assert _dump(raw) == before, name


def test_no_good_replicas_refuses_every_write_changing_nothing(server: RedisServer) -> None:
    store, raw, before = _populated(server)
    raw.config_set("min-replicas-to-write", 1)  # no replica: none is good
    try:
        _all_refused(store, raw, before)
        assert store.get(NS, "base").status == "active"  # reads still answer
    finally:
        raw.config_set("min-replicas-to-write", 0)
    store.use_grants(NS, ["g1"])  # and writes again once Redis takes them
    store.close()


def test_a_failed_background_save_refuses_every_write(server: RedisServer, tmp_path: Path) -> None:
    store, raw, _ = _populated(server)
    gone = tmp_path / "gone"
    gone.mkdir()
    raw.config_set("dir", str(gone))
    raw.config_set("save", "3600 1")
    shutil.rmtree(gone)
    raw.bgsave()
    deadline = time.monotonic() + 10
    while raw.info("persistence")["rdb_last_bgsave_status"] != "err":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    before = _dump(raw)
    _all_refused(store, raw, before)
    raw.config_set("save", "")  # stop-writes-on-bgsave-error applies while saves are on
    store.use_grants(NS, ["g1"])
    store.close()


def test_another_clients_long_script_is_unavailable_not_internal(server: RedisServer) -> None:
    store, raw, _ = _populated(server)
    raw.config_set("busy-reply-threshold", 100)
    spinning = threading.Thread(
        target=lambda: server.client(socket_timeout=20).eval(
            "local t = redis.call('TIME') while true do local n = redis.call('TIME') "
            "if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > 1500000 then break end end "
            "return 1",
            0,
        )
    )
    spinning.start()
    try:
        time.sleep(0.3)
        with pytest.raises(StoreUnavailableError, match="BUSY"):
            store.use_grants(NS, ["g1"])
        with pytest.raises(StoreUnavailableError, match="BUSY"):
            store.get(NS, "base")
    finally:
        spinning.join(timeout=10)
    [g] = store.grants(NS)
    assert g.used == 0
    store.close()

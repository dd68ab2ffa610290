"""What only the Redis backend promises: key layout, round trips, memory, no stray keys."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from memlineage.lineage import ManualClock, MemoryRecord, Status, UnknownDependencyError
from memlineage.lineage.decisions import KeptDecision
from memlineage.lineage.errors import StoreUnavailableError
from memlineage.lineage.grants import GrantRecord
from memlineage.store import open_store, redis_decisions, redis_scripts
from memlineage.store.redis_keys import RedisKeys
from memlineage.store.redis_store import RedisStore
from redis.cluster import RedisCluster
from redis.crc import key_slot
from support.memories import NOW
from support.proposals import stale_at_now
from support.redis_servers import RedisClusterHandle, RedisServer, start_redis_server

NS = "tenant:r/user:9"


class CountingConnection(redis.Connection):
    """A real connection that counts the packets it sends (one per round trip)."""

    sends = 0

    def send_packed_command(self, command, check_health=True):  # type: ignore[no-untyped-def]
        CountingConnection.sends += 1
        return super().send_packed_command(command, check_health)


@pytest.fixture
def rstore(redis_server: RedisServer) -> Iterator[RedisStore]:
    pool = redis.ConnectionPool(
        host=redis_server.host,
        port=redis_server.port,
        decode_responses=True,
        connection_class=CountingConnection,
    )
    client = redis.Redis(connection_pool=pool)
    client.flushall()
    store = RedisStore(client, clock=ManualClock(NOW))
    yield store
    store.close()


def test_all_keys_of_a_namespace_share_one_slot() -> None:
    keys = RedisKeys()
    built = [
        keys.record(NS, "a"),
        keys.derivations(NS, "b:c"),
        keys.history(NS, "d"),
        keys.claim(NS, "user:1", "city"),
        keys.counter(NS, "tool:x"),
        keys.events(NS),
        keys.claim_group(NS, "user:1", "city"),
        keys.sources(NS),
        keys.review(NS),
        keys.decisions(NS),
        keys.decision_index(NS),
        *keys.triples(NS, ["e", "f"]),
    ]
    assert {key_slot(k.encode()) for k in built} == {key_slot(b"%s" % NS.encode())}
    assert all(k.startswith(f"ml:{{{NS}}}:") for k in built)
    with pytest.raises(ValueError):
        RedisKeys("bad{prefix}")


def test_cluster_stores_a_namespace_on_one_node(redis_cluster: RedisClusterHandle) -> None:
    store = open_store(redis_cluster.url, clock=ManualClock(NOW))
    client: RedisCluster = store.client  # type: ignore[attr-defined]
    client.flushall(target_nodes=RedisCluster.PRIMARIES)
    for ns in ("n1", "n2", "n3", "n4"):
        store.record(
            MemoryRecord(id="a", namespace=ns, creator_id="user:u", subject="s", attribute="t")
        )
        store.record(MemoryRecord(id="b", namespace=ns, creator_id="user:u", dependencies=("a",)))
        store.revoke(ns, "a")
        store.incr_counter(ns, "c")
        store.keep_decisions(
            ns, [KeptDecision(f"d-{ns}", ns, "read", ("a", "b"), "user:u", NOW, "v", "allow", "{}")]
        )
    holders: dict[str, set[int]] = {}
    seen: set[str] = set()
    for node in client.get_primaries():
        conn = redis.Redis(host=node.host, port=node.port, decode_responses=True)
        for key in conn.scan_iter("ml:*"):
            seen.add(key)
            # The namespace registry, by design (ids are scoped: no global id index).
            if key == "ml:namespaces":
                continue
            assert not key.startswith("ml:loc:"), key
            ns = re.match(r"ml:\{([^}]*)\}", key).group(1)  # type: ignore[union-attr]
            holders.setdefault(ns, set()).add(node.port)
        conn.close()
    assert set(holders) == {"n1", "n2", "n3", "n4"}
    assert {"ml:{n1}:dec", "ml:{n1}:dix"} <= seen  # kept decisions: in the namespace's slot
    assert all(len(ports) == 1 for ports in holders.values())
    assert len({p for ports in holders.values() for p in ports}) > 1  # spread over masters
    store.close()


def test_failed_record_leaves_no_key_behind(rstore: RedisStore) -> None:
    rstore.record(MemoryRecord(id="d0", namespace=NS, creator_id="user:u"))
    rstore.record(MemoryRecord(id="d2", namespace=NS, creator_id="user:u"))
    before = sorted(rstore.client.keys("*"))
    with pytest.raises(UnknownDependencyError):
        rstore.record(
            MemoryRecord(
                id="m",
                namespace=NS,
                creator_id="user:u",
                dependencies=("d0", "ghost", "d2"),
                subject="s",
                attribute="a",
            )
        )
    assert rstore.record_access(NS, ["ghost"]) == 0  # access never creates keys either
    assert sorted(rstore.client.keys("*")) == before


def test_get_many_of_100_is_one_round_trip(rstore: RedisStore) -> None:
    ids = [f"mem:{i:06d}" for i in range(100)]
    for memory_id in ids:
        rstore.record(MemoryRecord(id=memory_id, namespace=NS, creator_id="user:u"))
    # Once each script is cached in this Redis (a first EVALSHA on a fresh server is
    # NOSCRIPT, SCRIPT LOAD, EVALSHA: three sends), a call is one round trip.
    rstore.get_many(NS, ids[:1])
    rstore.record_access(NS, ids[:1])
    CountingConnection.sends = 0
    got = rstore.get_many(NS, ids)
    assert len(got) == 100
    assert CountingConnection.sends == 1
    CountingConnection.sends = 0
    rstore.record_access(NS, ids)
    assert CountingConnection.sends == 1


def test_lineage_view_costs_one_round_trip_per_level(rstore: RedisStore) -> None:
    prev: tuple[str, ...] = ()
    for i in range(6):  # a chain of 6 plus 20 children under the last one
        rstore.record(
            MemoryRecord(id=f"c{i}", namespace=NS, creator_id="user:u", dependencies=prev)
        )
        prev = (f"c{i}",)
    for j in range(20):
        rstore.record(
            MemoryRecord(id=f"k{j}", namespace=NS, creator_id="user:u", dependencies=("c5",))
        )
    CountingConnection.sends = 0
    view = rstore.lineage_view(NS, ["c5"], ancestor_depth=3, descendant_depth=1)
    assert len(view.records) == 1 + 3 + 20
    assert CountingConnection.sends == 1 + 3


def test_record_memory_usage_under_600_bytes(rstore: RedisStore) -> None:
    for d in ("mem:000001", "mem:000002", "mem:000003"):
        rstore.record(MemoryRecord(id=d, namespace=NS, creator_id="user:u"))
    rstore.record(
        MemoryRecord(
            id="mem:000004",
            namespace=NS,
            type="tool_result",
            tags=("travel", "flight", "price"),
            subject="user:42",
            attribute="destination_city",
            value="Shanghai",
            volatility="high",
            creator_kind="tool",
            creator_id="tool:flight_api",
            creator_confidence=0.85,
            context_id="ctx:000123",
            dependencies=("mem:000001", "mem:000002", "mem:000003"),
        )
    )
    usage = rstore.memory_usage(NS, "mem:000004")
    assert usage is not None and usage < 600


def test_every_script_documents_keys_and_argv() -> None:
    for name, source in redis_scripts.ALL.items():
        assert "-- KEYS[" in source and "ARGV[" in source, name
        assert "..':" not in source  # no key names built inside Lua


def test_cascade_cost_follows_descendants_not_store_size(rstore: RedisStore) -> None:
    for i in range(1500):  # unrelated memories the cascade must never look at
        rstore.record(
            MemoryRecord(
                id=f"bulk:{i}",
                namespace=NS,
                creator_id="user:u",
                dependencies=(f"bulk:{i - 1}",) if i else (),
            )
        )
    rstore.record(MemoryRecord(id="root", namespace=NS, creator_id="user:u"))
    for i in range(3):
        rstore.record(
            MemoryRecord(id=f"kid{i}", namespace=NS, creator_id="user:u", dependencies=("root",))
        )
    stats = rstore.client.info("stats")
    touched_before = stats["keyspace_hits"] + stats["keyspace_misses"]
    assert rstore.revoke(NS, "root").marked == 3
    stats = rstore.client.info("stats")
    touched = stats["keyspace_hits"] + stats["keyspace_misses"] - touched_before
    assert 4 <= touched < 40, touched  # a few key reads per touched memory, no scan


def test_chunked_cascade_over_a_wide_and_deep_graph(redis_server: RedisServer) -> None:
    store = open_store(redis_server.url, clock=ManualClock(NOW), cascade_chunk=7)
    store.record(MemoryRecord(id="root", namespace="wide", creator_id="user:u"))
    parents = ["root"]
    made = 0
    for level in range(3):  # 10 + 100 + 300 descendants, many chunks per level
        kids = []
        for p_i, parent in enumerate(parents):
            for k in range(10 if level < 2 else 3):
                kid = f"l{level}:{p_i}:{k}"
                deps = (parent,) if p_i == 0 else (parent, parents[p_i - 1])
                store.record(
                    MemoryRecord(id=kid, namespace="wide", creator_id="user:u", dependencies=deps)
                )
                kids.append(kid)
                made += 1
        parents = kids
    result = store.revoke("wide", "root")
    assert (result.marked, result.visited) == (made, made)
    view = store.descendants("wide", "root", max_depth=5, limit=made)
    assert {r.status for r in view.records} == {"pending_verification"}
    assert all(r.version == 2 for r in view.records)  # each marked exactly once
    store.close()


def test_open_store_urls(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from memlineage.store import EmbeddedStore

    assert isinstance(open_store("embedded"), EmbeddedStore)
    persisted = open_store(f"embedded://{tmp_path}/data")
    assert isinstance(persisted, EmbeddedStore)
    persisted.close()
    assert (tmp_path / "data" / "lineage.sqlite3").exists()
    for bad in ("mysql://x", "embedded://", "redis+cluster://nohost"):
        with pytest.raises(ValueError):
            open_store(bad)


def test_reliability_calls_are_one_round_trip(rstore: RedisStore) -> None:
    for i, source in enumerate(("agent:a", "agent:b", "agent:c")):
        rstore.record(
            MemoryRecord(
                id=f"m{i}",
                namespace=NS,
                creator_id=source,
                subject="job",
                attribute="state",
                value=str(i % 2),
            )
        )
    rstore.feedback(NS, ["m0"], True)  # warm the script cache (EVALSHA after a NOSCRIPT)
    rstore.schedule_review(NS, {"m0": NOW}, now=NOW)
    calls = {
        "source_stats": lambda: rstore.source_stats(NS, ["agent:a", "agent:b", "nobody"]),
        "feedback": lambda: rstore.feedback(NS, ["m0", "m1", "ghost"], False),
        "schedule_review": lambda: rstore.schedule_review(NS, {"m1": NOW, "m2": NOW}),
        "due_for_review": lambda: rstore.due_for_review(NS, now=NOW, limit=10),
        "unschedule_review": lambda: rstore.unschedule_review(NS, ["m2"]),
        "namespaces": rstore.namespaces,
    }
    for name, call in calls.items():
        CountingConnection.sends = 0
        call()
        assert CountingConnection.sends == 1, name
    CountingConnection.sends = 0
    assert len(rstore.claim_group(NS, "job", "state")) == 3
    assert CountingConnection.sends == 2  # the set, then one pipeline for the records
    CountingConnection.sends = 0
    rstore.record(
        MemoryRecord(
            id="m3", namespace=NS, creator_id="agent:d", subject="job", attribute="state", value="1"
        )
    )
    assert CountingConnection.sends == 3  # group read, record script, location/registry


def test_record_retries_when_the_claim_group_changed(
    rstore: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rstore.record(
        MemoryRecord(
            id="a",
            namespace=NS,
            creator_id="agent:a",
            subject="job",
            attribute="state",
            value="done",
        )
    )
    rstore.record(
        MemoryRecord(
            id="b",
            namespace=NS,
            creator_id="agent:b",
            subject="job",
            attribute="state",
            value="failed",
        )
    )
    # A stale read of the group (as if "b" were recorded right after it): the script
    # refuses, hands back the group it saw, and the second attempt counts both members.
    monkeypatch.setattr(rstore.client, "smembers", lambda key: {"a"})
    CountingConnection.sends = 0
    out = rstore.record(
        MemoryRecord(
            id="c",
            namespace=NS,
            creator_id="agent:c",
            subject="job",
            attribute="state",
            value="failed",
        )
    )
    assert CountingConnection.sends == 3  # two record scripts, location/registry
    assert (out.confirmed_by, out.contradicted_by) == (("agent:b",), ("agent:a",))
    assert rstore.get(NS, "a").contradicted_by == ("agent:b", "agent:c")
    assert rstore.source_stats(NS, ["agent:a", "agent:b", "agent:c"]) == {
        "agent:a": (0.0, 2.0),
        "agent:b": (1.0, 1.0),
        "agent:c": (1.0, 1.0),
    }


def test_a_record_with_marks_and_counters_stays_small(rstore: RedisStore) -> None:
    """Plain records store none of the new fields; a confirmed, contradicted, used and
    reviewed one stays well within the budget too."""
    for i, source in enumerate(("agent:a", "agent:b", "agent:c")):
        rstore.record(
            MemoryRecord(
                id=f"mem:00000{i}",
                namespace=NS,
                type="tool_result",
                tags=("travel", "flight", "price"),
                subject="user:42",
                attribute="destination_city",
                value="Shanghai" if i < 2 else "Paris",
                creator_kind="agent",
                creator_id=source,
                creator_confidence=0.85,
                context_id="ctx:000123",
            )
        )
    fields = rstore.client.hgetall(rstore.keys.record(NS, "mem:000000"))
    assert set(fields) >= {"y", "z"} and not set(fields) & {"j", "q", "r"}
    rstore.feedback(NS, ["mem:000000"], True)
    rstore.feedback(NS, ["mem:000000"], False)
    rstore.schedule_review(NS, {"mem:000000": NOW + 60}, now=NOW)
    usage = rstore.memory_usage(NS, "mem:000000")
    assert usage is not None and usage < 600


def test_only_the_network_store_waits_on_the_network(rstore: RedisStore) -> None:
    """The server sizes its worker pool by it (grpc_api/server.py)."""
    from memlineage.store import EmbeddedStore

    assert rstore.waits_on_network
    assert not EmbeddedStore().waits_on_network


def test_every_key_the_store_writes_has_the_type_its_layout_names(rstore: RedisStore) -> None:
    """``RedisKeys.type_of`` (how a key of another type is named in DATA_LOSS) says
    what TYPE answers for every key kind the store writes."""
    ns = "typed"

    def rec(memory_id: str, *deps: str, **fields: object) -> MemoryRecord:
        return MemoryRecord(id=memory_id, namespace=ns, dependencies=deps, **fields)  # type: ignore[arg-type]

    claim = {"subject": "user:1", "attribute": "city"}
    rstore.record_claim(rec("a", creator_id="user:u", value="Paris", **claim), now=NOW)
    rstore.record_claim(rec("b", creator_id="user:v", value="Paris", **claim), now=NOW, count="c")
    rstore.record(rec("c", "a", creator_id="user:u"), now=NOW)
    rstore.revise(rec("c", "b", creator_id="user:u"), expected_version=1, now=NOW + 1)
    rstore.add_dependencies(ns, "c", ["a"], expected_version=2, now=NOW + 2)
    rstore.revoke(ns, "c", now=NOW + 3)  # its history list
    rstore.set_status(ns, "a", Status.ARCHIVED, now=NOW + 4)
    rstore.set_status(ns, "a", Status.ACTIVE, now=NOW + 5)  # a claim revival: cr
    rstore.record_accesses(ns, {"a": (1, NOW)})
    rstore.keep_decisions(
        ns, [KeptDecision("d-1", ns, "read", ("a",), "user:u", NOW, "v", "allow", "{}")]
    )
    rstore.put_grant(GrantRecord("g-1", ns, "user:u", ("send",), source="tool:*"), now=NOW)
    assert rstore.use_grants(ns, ["g-1"], now=NOW)
    rstore.save_proposal(stale_at_now(ns, "a"))
    kinds = {}
    for key in rstore.client.scan_iter(f"ml:{{{ns}}}:*"):
        kinds[key] = rstore.client.type(key)
        assert rstore.keys.type_of(key) == kinds[key], key
    kinds[rstore.keys.namespaces()] = rstore.client.type(rstore.keys.namespaces())
    assert rstore.keys.type_of(rstore.keys.namespaces()) == "set"
    assert set(kinds.values()) == {"hash", "list", "string", "stream", "set", "zset"}
    suffixes = {k.split("}:", 1)[1].split(":", 1)[0] for k in kinds if "}:" in k}
    assert suffixes == {
        "m", "d", "h", "vs", "c", "w", "e", "cw", "ca", "cr", "ev", "cg", "cp", "src",
        "rv", "dec", "dix", "g", "gu", "pp",
    }  # fmt: skip
    assert rstore.keys.type_of("ml:other") is None
    assert rstore.keys.type_of("elsewhere:{typed}:m:a") is None


def _script_calls(client: redis.Redis) -> int:
    """EVALSHA calls the server has served (its own command statistics)."""
    stats = client.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)) if isinstance(stats, dict) else 0


def test_a_memorys_recent_decisions_are_looked_for_in_bounded_calls(
    rstore: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The namespace's decision stream is scanned newest first in calls of at most
    `SCAN_PER_CALL` entries, Redis free for other clients between them (one script
    scanned up to `decision_retention` entries, 10,000: ~22 ms with Redis held);
    what is found is the same across the calls' boundaries, the limit and the
    retention bound as before."""
    monkeypatch.setattr(redis_decisions, "SCAN_PER_CALL", 7)
    entries = [
        KeptDecision(
            f"d{i}",
            NS,
            "read",
            ("m",) if i % 5 == 0 else (f"o{i}", "m2"),
            "user:u",
            NOW + i,
            "v",
            "allow",
            "{}",
        )
        for i in range(60)
    ]
    rstore.keep_decisions(NS, entries)
    on_m = [e.decision_id for e in reversed(entries) if "m" in e.memory_ids]
    for limit in (1, 3, 7, 12, 50):
        assert [k.decision_id for k in rstore.kept_decisions(NS, "m", limit)] == on_m[:limit]
    assert len(rstore.kept_decisions(NS, "m2", 100)) == 48
    before = _script_calls(rstore.client)
    assert rstore.kept_decisions(NS, "nobody", 20) == []
    assert _script_calls(rstore.client) - before == 9  # 60 entries, 7 a call
    monkeypatch.setattr(rstore, "decision_retention", 20)  # no more than the newest 20
    assert [k.decision_id for k in rstore.kept_decisions(NS, "m", 50)] == on_m[:4]


def test_redis_paused_between_two_calls_of_the_look_is_one_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis stopped (SIGSTOP) after the look's second call: the third waits one socket
    timeout and the look fails as the store being unavailable (not a partial answer,
    not a wait per remaining call); continued (SIGCONT), the same look answers whole."""
    monkeypatch.setattr(redis_decisions, "SCAN_PER_CALL", 7)
    server = start_redis_server(tmp_path, aof=False)
    assert server.proc is not None
    store = open_store(server.url, clock=ManualClock(NOW), socket_timeout=0.5)
    assert isinstance(store, RedisStore)
    try:
        kept = [
            KeptDecision(f"d{i}", NS, "read", (f"o{i}",), "user:u", NOW + i, "v", "allow", "{}")
            for i in range(60)
        ]
        store.keep_decisions(NS, kept)
        scripts = store._decision_scripts  # the registered scripts, wrapped to pause Redis
        recent, calls = scripts["recent"], []

        def pausing(**kwargs: Any) -> Any:
            calls.append(kwargs["args"][3])
            if len(calls) == 3:
                os.kill(server.proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]
            return recent(**kwargs)

        monkeypatch.setitem(scripts, "recent", pausing)
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError):
            store.kept_decisions(NS, "nobody", 20)
        assert time.monotonic() - started < 2.0  # one timeout (0.5 s), and a reconnect
        assert len(calls) == 3 and calls[0] == "+" and calls[2].startswith("(")
        os.kill(server.proc.pid, signal.SIGCONT)
        monkeypatch.setitem(scripts, "recent", recent)
        assert [k.decision_id for k in store.kept_decisions(NS, "o3", 20)] == ["d3"]
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        store.close()
        server.stop()

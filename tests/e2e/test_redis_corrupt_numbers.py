"""A stored number a Redis script adds to and cannot (a version, an access or use count
that HINCRBY refuses, a source statistic HINCRBYFLOAT refuses, a write counter INCR
refuses, a missing or damaged version met by a cascade), written with redis-py into a
real redis-server under a real `memlineage serve`.

The values here are the ones the strict read of a record lets through (Python's int()
takes "07", "+3" and " 2"; Redis does not) or that it never reads (a descendant's
version, the counters, the source statistics), so the scripts meet them: UpdateStatus
and Feedback answer DATA_LOSS naming the key and field, and Redis is left exactly as
it was (before, the scripts raised a raw ResponseError, INTERNAL to the client, after
writing part of the change: the status before the version, the first records'
counts before the damaged one's, every write before the counter). The other
namespaces go on being served. A cascade that meets a descendant whose version is
damaged marks it all the same and leaves the version as it is (logged); the access
flush refuses its whole batch, logged, and writes nothing."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import redis
from memlineage.client import MemLineageClient
from memlineage.v1 import memlineage_pb2 as pb
from support.corrupt_redis import (
    TOKEN,
    Served,
    client,
    corrupt_redis_fixtures,
    refused_reading,
)
from support.redis_servers import start_redis_server
from support.serve_process import ServeProcess
from support.sidecar import BUNDLED_POLICIES

CREATOR = "user:alice"
MEMO, OTHER, CHILD = "memo", "other", "child"

# name: (field of MEMO's record hash, the value written there, the call the scripts
# refuse); the strict read of the record takes every one of these values.
SCRIPT_DAMAGE: dict[str, tuple[str, bytes, str]] = {
    "version-leading-zero": ("V", b"07", "revoke"),
    "version-plus-sign": ("V", b"+3", "revoke"),
    "version-leading-zero-compress": ("V", b"01", "compress"),
    "uses-ok-plus-sign": ("j", b"+1", "feedback-ok"),
    "uses-failed-space": ("q", b" 2", "feedback-bad"),
    "uses-failed-underscore": ("q", b"1_0", "feedback-bad"),
}
NAMESPACES = [
    *(f"{s}-n-{n}" for n in SCRIPT_DAMAGE for s in ("corrupt", "healthy")),
    "counter",
    "counter-healthy",
    "sources",
    "cascade",
]


def rkey(ns: str, memory_id: str) -> str:
    return f"ml:{{{ns}}}:m:{memory_id}"


served, raw = corrupt_redis_fixtures("redis-corrupt-numbers", lambda: NAMESPACES)


def setup(c: MemLineageClient) -> None:
    assert c.record(MEMO, creator=CREATOR).recorded
    assert c.record(OTHER, creator=CREATOR).recorded
    assert c.record("summary", creator=CREATOR, dependencies=[MEMO]).recorded


def dump(r: redis.Redis, ns: str, kind: str = "*") -> dict[bytes, object]:
    """Every key of the namespace (of `kind`: m the records) and its value (the decision
    reuse counters too)."""
    out: dict[bytes, object] = {}
    for key in sorted(r.scan_iter(match=f"ml:{{{ns}}}:{kind}", count=1000)):
        kind = r.type(key)
        if kind == b"hash":
            out[key] = r.hgetall(key)
        elif kind == b"list":
            out[key] = r.lrange(key, 0, -1)
        elif kind == b"set":
            out[key] = sorted(r.smembers(key))
        elif kind == b"zset":
            out[key] = r.zrange(key, 0, -1, withscores=True)
        elif kind == b"stream":
            out[key] = r.xrange(key)
        else:
            out[key] = r.get(key)
    return out


def call_of(c: MemLineageClient, what: str) -> Callable[[], object]:
    if what == "revoke":
        return lambda: c.revoke(MEMO, reason="leaked")
    if what == "compress":
        return lambda: c.compress(MEMO, "summary")
    return lambda: c.feedback("", [OTHER, MEMO], success=what == "feedback-ok")


@pytest.mark.parametrize("name", list(SCRIPT_DAMAGE))
def test_a_number_a_script_cannot_add_to_is_data_loss_and_nothing_is_written(
    served: Served, raw: redis.Redis, name: str
) -> None:
    address = served.address
    ns, healthy = f"corrupt-n-{name}", f"healthy-n-{name}"
    field, value, what = SCRIPT_DAMAGE[name]
    key = rkey(ns, MEMO)
    with client(address, ns) as c, client(address, healthy) as h:
        setup(c)
        setup(h)
        old = raw.hget(key, field)
        raw.hset(key, field, value)
        before = dump(raw, ns)

        details = refused_reading(key, call_of(c, what))
        assert f"field {field!r}" in details, details
        assert dump(raw, ns) == before  # nothing written, not even the counters

        assert c.check("read", OTHER).effect == pb.EFFECT_ALLOW  # the namespace is served
        call_of(h, what)()  # and the healthy namespace's same call goes through
        assert h.explain(MEMO).memory.id == MEMO

        if old is None:  # mended: the call goes through
            raw.hdel(key, field)
        else:
            raw.hset(key, field, old)
        call_of(c, what)()


def test_a_damaged_write_counter_is_data_loss_naming_it(served: Served, raw: redis.Redis) -> None:
    address = served.address
    with client(address, "counter") as c, client(address, "counter-healthy") as h:
        setup(c)
        setup(h)
        key = "ml:{counter}:cw"
        old = raw.get(key)
        assert old is not None
        raw.set(key, b"lots")
        before = dump(raw, "counter")
        for call in (
            lambda: c.check("read", OTHER),  # reads the counters (decision reuse)
            lambda: c.revoke(MEMO),
            lambda: c.feedback("", [MEMO], success=True),
            lambda: c.record("new", creator=CREATOR),
        ):
            refused_reading(key, call)
        assert dump(raw, "counter") == before
        assert h.revoke(MEMO).applied
        raw.set(key, old)
        assert c.revoke(MEMO).applied


def test_a_damaged_source_statistic_is_data_loss_naming_it(
    served: Served, raw: redis.Redis
) -> None:
    address = served.address
    with client(address, "sources") as c:
        setup(c)
        key = "ml:{sources}:src"
        raw.hset(key, f"{CREATOR}|ok", b"many")
        before = dump(raw, "sources")
        details = refused_reading(key, lambda: c.feedback("", [MEMO, OTHER], success=True))
        assert f"{CREATOR}|ok" in details, details
        refused_reading(key, lambda: c.check("read", MEMO))  # scoring reads the statistics
        assert dump(raw, "sources") == before
        raw.hset(key, f"{CREATOR}|ok", b"1")
        assert c.feedback("", [MEMO, OTHER], success=True).updated == 2


@pytest.mark.parametrize("damage", [b"abc", None])
def test_a_cascade_marks_a_descendant_whose_version_is_damaged(
    served: Served, raw: redis.Redis, damage: bytes | None
) -> None:
    """The revoke's view does not read the descendants: the cascade script meets the
    damaged version. The revoke is applied and every descendant marked, the damaged one
    too (status and history: pending_verification once its version is mended), its
    version left as it is, the key logged; reads of it (and of its descendants, whose
    lineage it is) answer DATA_LOSS meanwhile. Before, the script raised a raw
    ResponseError (INTERNAL) after the root was revoked and the grandchild was left
    active."""
    sidecar = served.sidecar
    ns = "cascade"
    tail = "missing" if damage is None else damage.decode()
    root, child, grandchild = f"root-{tail}", f"child-{tail}", f"grand-{tail}"
    with client(sidecar.address, ns) as c:
        assert c.record(root, creator=CREATOR).recorded
        assert c.record(child, creator=CREATOR, dependencies=[root]).recorded
        assert c.record(grandchild, creator=CREATOR, dependencies=[child]).recorded
        key = rkey(ns, child)
        if damage is None:
            raw.hdel(key, "V")
        else:
            raw.hset(key, "V", damage)

        out = c.revoke(root, reason="leaked")
        assert out.applied
        assert sorted(out.affected_ids) == sorted([child, grandchild])
        sidecar.expect(rf"redis {re.escape(key)}: the value of field 'V' \(version\) is missing")
        assert raw.hget(key, "S") == b"pending_verification"
        assert raw.hget(key, "V") == damage
        assert raw.hget(rkey(ns, grandchild), "S") == b"pending_verification"
        refused_reading(key, lambda: c.explain(child))

        raw.hset(key, "V", b"2")  # mended
        assert c.explain(child).memory.status == pb.STATUS_PENDING_VERIFICATION
        assert c.explain(grandchild).memory.status == pb.STATUS_PENDING_VERIFICATION


def test_the_access_flush_refuses_a_batch_with_a_damaged_count_and_writes_nothing(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The flush after the Check: the count was damaged between the read and the
    flush (here: before the final flush at stop). Nothing of the batch is written and
    the log names the namespace and the key; before, the first records' counts were
    added and the flush raised ResponseError."""
    server = start_redis_server(tmp_path_factory.mktemp("redis-corrupt-access"))
    try:
        sidecar = ServeProcess(
            [
                "--store",
                server.url,
                "--policies",
                BUNDLED_POLICIES,
                "--access-flush-seconds",
                "3600",
            ],
            env={"MEMLINEAGE_TOKENS": f"{TOKEN}=acc"},
        )
        raw = server.client(socket_timeout=5)
        try:
            with client(sidecar.address, "acc") as c:
                setup(c)
                c.filter_rank([(OTHER, 0.9), (MEMO, 0.8)])
            key = rkey("acc", MEMO)
            raw.hset(key, "n", b"007")
            before = dump(raw, "acc", "m:*")
        finally:
            sidecar.stop()
        # logged with the key and the namespace's batch dropped (never raised: the flush
        # before one namespace's Explain must not fail it with another namespace's key)
        sidecar.expect(
            rf"access statistics of 2 memories of namespace 'acc' dropped: "
            rf"redis {re.escape(key)} cannot be read: .*field 'n'"
        )
        assert dump(raw, "acc", "m:*") == before  # OTHER's count neither
        raw.close()
    finally:
        server.stop()

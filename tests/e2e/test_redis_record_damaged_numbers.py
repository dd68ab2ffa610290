"""Record and Revise through a real `memlineage serve` over a real redis-server, a
stored number their script adds to damaged with redis-py first (a value the strict read
of a record lets through, so the engine's reads pass and the script meets it): the
version of the claim holder a Record supersedes or of a descendant its cascade marks, the
version of the memory revised or of a descendant. The RPC answers DATA_LOSS naming the
key and the field, every key of the namespace is byte for byte as it was (DUMP), and
once the value is mended the same RPC goes through.

Before, a descendant's "+3" let the Record through, written "4" (Lua's tonumber takes
it); a holder's "07" met HINCRBY after the record and the holder's status were written
(DATA_LOSS saying the earlier writes are kept); the Revise wrote "2.5" over a
descendant's "1.5", and answered its own version "07" with FAILED_PRECONDITION, a
conflict between 7 and 7.

A key of another Redis type than the store keeps there, each kind a Record or Revise
writes or reads (the event stream, the review schedule, the claim key and group, the
rate counter, the graph epoch, a history, derivations or versions list, the write
counter), is DATA_LOSS naming the key, and nothing is
written either. Before, a key first written after the script's first write failed its
command halfway (the record, the supersession or the revision kept without their
event, review, history or derivation link), and one the engine reads first was a raw
WRONGTYPE: INTERNAL."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis
from memlineage.client import MemLineageClient
from memlineage.v1 import memlineage_pb2 as pb
from support.corrupt_redis import Served, client, corrupt_redis_fixtures, refused_reading

CREATOR = "user:alice"
CITY = ("user:1", "city")

# name: (the memory damaged, its V written so, the call)
DAMAGE: dict[str, tuple[str, bytes, str]] = {
    "record-holder-version": ("h", b"07", "record"),
    "record-descendant-version": ("d2", b"+3", "record"),
    "revise-version": ("h", b"07", "revise"),
    "revise-descendant-version": ("d1", b"1.5", "revise"),
}

# name: (the key after "ml:{ns}:", the Redis type written there instead, the call)
WRONG_TYPE: dict[str, tuple[str, str, str]] = {
    "record-events": ("ev", "string", "record"),
    "record-review": ("rv", "set", "record"),
    "record-claim": ("c:user:1|city", "hash", "record"),
    "record-claim-group": ("cg:user:1|city", "string", "record"),
    "record-rate-counter": ("w:calls:user:alice", "string", "record"),
    "record-history": ("h:n", "string", "record"),
    "record-holder-history": ("h:h", "string", "record"),
    "record-descendant-derivations": ("d:d1", "string", "record"),
    "record-descendant-history": ("h:d2", "string", "record"),
    "record-write-counter": ("cw", "hash", "record"),
    "revise-events": ("ev", "string", "revise"),
    "revise-review": ("rv", "string", "revise"),
    "revise-epoch": ("e", "hash", "revise"),
    "revise-versions": ("vs:h", "string", "revise"),
    "revise-history": ("h:h", "string", "revise"),
    "revise-descendant-history": ("h:d2", "string", "revise"),
    "revise-write-counter": ("cw", "list", "revise"),
}

served, raw = corrupt_redis_fixtures(
    "redis-record-numbers", lambda: [f"n-{n}" for n in (*DAMAGE, *WRONG_TYPE)]
)


def dump(r: redis.Redis, ns: str) -> dict[bytes, bytes | None]:
    keys = sorted(r.scan_iter(match=f"ml:{{{ns}}}:*", count=1000))
    return {k: r.dump(k) for k in keys}


def setup(c: MemLineageClient) -> None:
    """h holds the claim (Paris); d1 derives from h, d2 from d1."""
    assert c.record("h", creator=CREATOR, claim=(*CITY, "Paris")).recorded
    assert c.record("d1", creator=CREATOR, dependencies=["h"]).recorded
    assert c.record("d2", creator=CREATOR, dependencies=["d1"]).recorded


def call_of(c: MemLineageClient, what: str, version: int) -> Callable[[], object]:
    if what == "record":  # the same user says Rome: h superseded, d1 and d2 marked
        return lambda: c.record("n", creator=CREATOR, claim=(*CITY, "Rome"))
    return lambda: c.revise(
        "h", expected_version=version, creator=CREATOR, claim=(*CITY, "Lyon"), tags=["moved"]
    )


@pytest.mark.parametrize("name", list(DAMAGE))
def test_a_damaged_number_fails_the_whole_rpc_and_nothing_is_written(
    served: Served, raw: redis.Redis, name: str
) -> None:
    ns = f"n-{name}"
    where, value, what = DAMAGE[name]
    key = f"ml:{{{ns}}}:m:{where}"
    with client(served.address, ns) as c:
        setup(c)
        old = raw.hget(key, "V")
        raw.hset(key, "V", value)
        before = dump(raw, ns)
        version = int(value) if where == "h" else 1  # as the strict read takes it

        details = refused_reading(key, call_of(c, what, version))
        assert "field 'V'" in details and "nothing was changed" in details, details
        assert dump(raw, ns) == before  # nothing written, not even the counters

        assert old is not None
        raw.hset(key, "V", old)  # mended: the same call goes through
        out = call_of(c, what, 1)()
        assert c.explain("d2").memory.status == pb.STATUS_PENDING_VERIFICATION
        if what == "record":
            assert isinstance(out, pb.RecordResponse) and out.superseded_id == "h"
            assert sorted(out.affected_ids) == ["d1", "d2"]
        else:
            assert isinstance(out, pb.ReviseResponse) and out.applied
            assert out.memory.version == 2


def retype(r: redis.Redis, key: str, kind: str) -> str:
    """`key` holding a value of another Redis type; the type TYPE names."""
    r.delete(key)
    if kind == "string":
        r.set(key, b"x")
    elif kind == "hash":
        r.hset(key, "x", b"1")
    elif kind == "set":
        r.sadd(key, b"x")
    else:
        r.rpush(key, b"x")
        return "list"
    return kind


@pytest.mark.parametrize("name", list(WRONG_TYPE))
def test_a_key_of_another_type_fails_the_whole_rpc_and_nothing_is_written(
    served: Served, raw: redis.Redis, name: str
) -> None:
    ns = f"n-{name}"
    suffix, kind, what = WRONG_TYPE[name]
    key = f"ml:{{{ns}}}:{suffix}"
    with client(served.address, ns) as c:
        setup(c)
        old = raw.dump(key)
        kind = retype(raw, key, kind)
        before = dump(raw, ns)

        details = refused_reading(key, call_of(c, what, 1))
        assert f"it holds a Redis {kind}, " in details, details
        assert "nothing was changed" in details, details
        assert dump(raw, ns) == before  # nothing written, not even the counters

        raw.delete(key)  # mended: the same call goes through
        if old is not None:
            raw.restore(key, 0, old)
        out = call_of(c, what, 1)()
        assert c.explain("d2").memory.status == pb.STATUS_PENDING_VERIFICATION
        if what == "record":
            assert isinstance(out, pb.RecordResponse) and out.superseded_id == "h"
        else:
            assert isinstance(out, pb.ReviseResponse) and out.applied

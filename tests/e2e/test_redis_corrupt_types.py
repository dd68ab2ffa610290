"""A key of another Redis type than the store keeps there, through a real `memlineage
serve` over a real redis-server: one RPC of each family of store calls outside Record
and Revise (tests/e2e/test_redis_record_damaged_numbers.py has those) answers
DATA_LOSS naming the key, and nothing is written (every key of the namespace as DUMP
had it), except where the message says what was kept: a Record whose namespace
registry is of another type (the memory is recorded), an UpdateStatus whose cascade
meets one (the status change is kept). Before, each was INTERNAL (a raw WRONGTYPE), a
Check read a counter of another type as absent and answered, and the cascade marked
part of its chunk."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from memlineage.client import MemLineageClient
from memlineage.v1 import memlineage_pb2 as pb
from support.corrupt_redis import Served, client, corrupt_redis_fixtures, refused_reading
from support.wrong_type import namespace_keys

CREATOR = "user:alice"


def watch_from_now(c: MemLineageClient) -> object:
    with c.watch() as stream:  # the newest cursor first: no wait when it is refused
        return next(stream)


def watch_from_oldest(c: MemLineageClient) -> object:
    with c.watch(from_oldest=True) as stream:
        return next(stream)


# name: (the key after "ml:{ns}:", the Redis type written there instead, the RPC, the
# same RPC once the key is mended)
Call = Callable[[MemLineageClient], object]
WRONG_TYPE: dict[str, tuple[str, str, Call, Call | None]] = {
    "grant": ("g", "string", lambda c: c.grant(["send"], source="tool:*"), None),
    "watch": ("ev", "string", watch_from_now, watch_from_oldest),
    "explain-decisions": ("dec", "hash", lambda c: c.explain("b"), None),
    "explain-proposal": ("pp", "string", lambda c: c.explain("b"), None),
    "check-write-counter": ("cw", "hash", lambda c: c.check("read", ["b"]), None),
}
NAMESPACES = [f"t-{n}" for n in WRONG_TYPE] + ["t-registry", "t-cascade"]

served, raw = corrupt_redis_fixtures("redis-corrupt-types", lambda: NAMESPACES)


def dump(r: redis.Redis, ns: str) -> dict[Any, Any]:
    """Every key of the namespace by content (a hash or set by its members: the DUMP
    order of a hash table moves with its incremental rehash on a mere read)."""
    return namespace_keys(r, ns)


def setup(c: MemLineageClient) -> None:
    """a, b on a; b read once (a kept decision); Explain drains what the sidecar
    queued (decisions, accesses), so that nothing is written behind the test."""
    assert c.record("a", creator=CREATOR).recorded
    assert c.record("b", creator=CREATOR, dependencies=["a"]).recorded
    c.check("read", ["b"])
    c.explain("b")


@pytest.mark.parametrize("name", list(WRONG_TYPE))
def test_a_key_of_another_type_is_data_loss_naming_it(
    served: Served, raw: redis.Redis, name: str
) -> None:
    ns = f"t-{name}"
    suffix, kind, call, again = WRONG_TYPE[name]
    key = f"ml:{{{ns}}}:{suffix}"
    with client(served.address, ns) as c:
        setup(c)
        old = raw.dump(key)
        raw.delete(key)
        if kind == "string":
            raw.set(key, b"x")
        else:
            raw.hset(key, "x", b"1")
        before = dump(raw, ns)

        details = refused_reading(key, lambda: call(c))
        assert f"it holds a Redis {kind}, " in details and "nothing was changed" in details
        assert dump(raw, ns) == before

        raw.delete(key)  # mended: the same call goes through
        if old is not None:
            raw.restore(key, 0, old)
        assert (again or call)(c) is not None


def test_a_registry_of_another_type_is_data_loss_saying_the_memory_was_recorded(
    served: Served, raw: redis.Redis
) -> None:
    registry = b"ml:namespaces"
    old = raw.dump(registry)  # the other tests' namespaces, when they ran first
    raw.delete(registry)
    raw.set(registry, b"x")
    try:
        with client(served.address, "t-registry") as c:
            details = refused_reading("ml:namespaces", lambda: c.record("a", creator=CREATOR))
            assert "the memory was recorded" in details, details
            assert c.explain("a").memory.id == "a"
    finally:
        raw.delete(registry)
        if old is not None:
            raw.restore(registry, 0, old)


def test_a_cascade_meeting_a_key_of_another_type_marks_none_of_its_chunk(
    served: Served, raw: redis.Redis
) -> None:
    ns = "t-cascade"
    key = f"ml:{{{ns}}}:h:d2"
    with client(served.address, ns) as c:
        assert c.record("r", creator=CREATOR).recorded
        for child in ("d1", "d2"):
            assert c.record(child, creator=CREATOR, dependencies=["r"]).recorded
        c.explain("r")
        raw.delete(key)
        raw.set(key, b"x")
        descendants = [f"ml:{{{ns}}}:{part}:{d}" for d in ("d1", "d2") for part in "mdh"]
        before = {k: raw.dump(k) for k in descendants}

        details = refused_reading(key, lambda: c.revoke("r"))
        assert {k: raw.dump(k) for k in descendants} == before
        assert "the change of 'r' is kept, and so are the 0 descendants" in details, details
        assert raw.hget(f"ml:{{{ns}}}:m:r", "S") == b"revoked"  # Explain of r reads h:d2
        assert c.explain("d1").memory.status == pb.STATUS_ACTIVE

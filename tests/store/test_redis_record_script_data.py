"""The Record and Revise scripts meeting a damaged stored number, on a real Redis,
standalone and Cluster (as ``test_redis_script_data.py`` does for the other scripts):
``StoreCorruptError`` naming the key and the field (DATA_LOSS to a caller, "nothing was
changed"), and every key of the namespace byte for byte as it was (``DUMP``). A Record
on Redis is all of it or nothing, a damaged value among what it adds to included.

The damage is written with redis-py after the memories were stored, as damage between a
caller's read and its script would be, and is what the strict read of a record lets
through (Python's int() takes "07" and "+3", Redis's INCR/HINCRBY do not, Lua's
tonumber() takes "+3" and " 2") or what the caller never reads: the claim group's source
statistics, the superseded holder's version, its descendants' versions, the graph epoch,
the write counter. Before, RECORD wrote the group members' confirmations before
HINCRBYFLOAT refused a source statistic, the whole record and the holder's status before
HINCRBY refused its version, and the record, the supersession and the earlier
descendants before ``tonumber(V) + 1`` failed on a descendant ("+3" it took: 4 written,
no error); REVISE wrote the revision before a descendant's version or INCR on the epoch
failed, and answered a version "07" with a conflict between 7 and 7."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, cast

import pytest
import redis
from memlineage.lineage.errors import StoreCorruptError
from memlineage.lineage.model import Status
from memlineage.store import LineageStore
from redis.cluster import RedisCluster
from support.memories import NOW, memory
from support.wrong_type import namespace_keys, refused_over

NS = "recnums"
mem = partial(memory, ns=NS)
CLAIM = {"subject": "user:1", "attribute": "city"}
pytestmark = pytest.mark.parametrize("backend", ["redis", "cluster"])
Raw = redis.Redis | RedisCluster


def key(name: str) -> str:
    """The namespace's key of that name (src, cw, cr, e), else the record hash of that id."""
    return f"ml:{{{NS}}}:{'' if name in ('src', 'cw', 'cr', 'e') else 'm:'}{name}"


@pytest.fixture
def raw(backend: str, request: pytest.FixtureRequest) -> Iterator[Raw]:
    """A client that does not decode: the damage and the comparison are bytes."""
    if backend == "redis":
        client: Raw = redis.Redis.from_url(request.getfixturevalue("redis_server").url)
    else:
        url = request.getfixturevalue("redis_cluster").url
        client = RedisCluster.from_url(url.replace("redis+cluster://", "redis://").split(",")[0])
    try:
        yield client
    finally:
        client.close()


def dump(raw: Raw) -> dict[Any, bytes | None]:
    """Every key of the namespace (one slot: its hash tag) as DUMP serialises it."""
    return namespace_keys(raw, NS)


def claims(store: LineageStore) -> Callable[[LineageStore], object]:
    """user:bob holds the claim; alice's Record of the same value confirms it (the
    source statistics user:alice|ok and user:bob|ok), of another contradicts it (|bad)."""
    store.record_claim(mem("m1", value="Paris", creator_id="user:bob", **CLAIM), now=NOW)
    return lambda s: s.record_claim(mem("m2", value="Paris", **CLAIM), now=NOW + 1)


def contradicts(store: LineageStore) -> Callable[[LineageStore], object]:
    store.record_claim(mem("m1", value="Paris", creator_id="user:bob", **CLAIM), now=NOW)
    return lambda s: s.record_claim(mem("m2", value="Rome", **CLAIM), now=NOW + 1)


def supersedes(store: LineageStore) -> Callable[[LineageStore], object]:
    """h holds the claim, d1 and d2 descend from it; n supersedes h (the cascade)."""
    store.record_claim(mem("h", value="Paris", **CLAIM), now=NOW)
    store.record(mem("d1", "h"), now=NOW)
    store.record(mem("d2", "d1"), now=NOW)
    return lambda s: s.record_claim(mem("n", value="Rome", **CLAIM), now=NOW + 1, supersede="h")


def revises(store: LineageStore) -> Callable[[LineageStore], object]:
    """r with descendants k1 and k2; r revised (the cascade marks them)."""
    store.record(mem("r"), now=NOW)
    store.record(mem("k1", "r"), now=NOW)
    store.record(mem("k2", "k1"), now=NOW)
    return lambda s: s.revise(mem("r", tags=("new",)), expected_version=version_of(s), now=NOW + 1)


def version_of(store: LineageStore) -> int:
    """The version revise() is called with: what the strict read makes of r's V."""
    return store.get(NS, "r").version


SETUPS = {"claims": claims, "contradicts": contradicts, "supersedes": supersedes}
SETUPS["revises"] = revises

# name: (setup, key name, field ("" a string key), damage (None: the field deleted))
DAMAGE: dict[str, tuple[str, str, str, bytes | None]] = {
    "record-own-statistic": ("claims", "src", "user:alice|ok", b"many"),
    "record-member-statistic": ("claims", "src", "user:bob|ok", b"1.5.2"),
    "record-statistic-space": ("contradicts", "src", "user:bob|bad", b" 3"),
    "record-statistic-nan": ("contradicts", "src", "user:alice|bad", b"nan"),
    "holder-version-zero": ("supersedes", "h", "V", b"07"),
    "holder-version-plus": ("supersedes", "h", "V", b"+3"),
    "holder-version-text": ("supersedes", "h", "V", b"x"),
    "descendant-version-plus": ("supersedes", "d2", "V", b"+3"),
    "descendant-version-text": ("supersedes", "d1", "V", b"abc"),
    "descendant-version-missing": ("supersedes", "d1", "V", None),
    "record-write-counter": ("supersedes", "cw", "", b"lots"),
    "record-claim-revivals": ("claims", "cr", "", b"lots"),
    "revise-version-zero": ("revises", "r", "V", b"07"),
    "revise-version-plus": ("revises", "r", "V", b"+3"),
    "revise-descendant-plus": ("revises", "k2", "V", b"+3"),
    "revise-descendant-text": ("revises", "k1", "V", b"1.5"),
    "revise-descendant-missing": ("revises", "k1", "V", None),
    "revise-epoch": ("revises", "e", "", b"07"),
    "revise-write-counter": ("revises", "cw", "", b"lots"),
    "revise-claim-revivals": ("revises", "cr", "", b"1.5"),
}


def damage(raw: Raw, k: str, field: str, value: bytes | None) -> None:
    if not field:
        raw.set(k, value or b"")
    elif value is None:
        raw.hdel(k, field)
    else:
        raw.hset(k, field, value)


def restore(raw: Raw, k: str, field: str, old: bytes | None) -> None:
    if old is not None:
        damage(raw, k, field, old)
    elif field:
        raw.hdel(k, field)
    else:
        raw.delete(k)


@pytest.mark.parametrize("name", list(DAMAGE))
def test_a_damaged_number_fails_the_whole_record_or_revision(
    store: LineageStore, raw: Raw, name: str
) -> None:
    setup, where, field, value = DAMAGE[name]
    call = SETUPS[setup](store)
    k = key(where)
    old = cast("bytes | None", raw.hget(k, field) if field else raw.get(k))
    damage(raw, k, field, value)
    before = dump(raw)

    with pytest.raises(StoreCorruptError) as err:
        call(store)
    message = str(err.value)
    assert err.value.grpc_status == "DATA_LOSS"
    assert message.startswith(f"redis {k} cannot be read: "), message
    assert f"field {field!r}" in message or not field, message
    assert "nothing was changed" in message, message
    assert dump(raw) == before

    restore(raw, k, field, old)  # mended: the same call goes through
    call(store)
    if setup == "supersedes":
        assert store.get(NS, "h").status == Status.SUPERSEDED
        assert store.get(NS, "d2").status == Status.PENDING_VERIFICATION
    if setup == "revises":
        assert store.get(NS, "r").version == 2
        assert store.get(NS, "k2").status == Status.PENDING_VERIFICATION


# A key of the wrong Redis type: each key Record and Revise write (or read first), as a
# value of another type. Before, a key first written after the scripts' first write (the
# event stream, the new memory's history, the review schedule, a rate counter, a
# dependency's derivations, a descendant's history, the versions list) failed its command
# with WRONGTYPE halfway: a half-applied Record or Revise; one read first (the claim group,
# the holder's derivations, the graph epoch) failed the store's own read with a raw
# ResponseError (INTERNAL to a caller).


def derives(store: LineageStore) -> Callable[[LineageStore], object]:
    """q derives from p, counted in the rate counter "calls"."""
    store.record(mem("p"), now=NOW)
    return lambda s: s.record_claim(mem("q", "p"), now=NOW + 1, count="calls")


def moves(store: LineageStore) -> Callable[[LineageStore], object]:
    """r depends on a, k1 on r, k2 on k1; the revision depends on b instead (a's
    derivations lose r, b's gain it; k1 and k2 are marked)."""
    for memory_id, deps in (("a", ()), ("b", ()), ("r", ("a",)), ("k1", ("r",))):
        store.record(mem(memory_id, *deps), now=NOW)
    store.record(mem("k2", "k1"), now=NOW)
    return lambda s: s.revise(mem("r", "b", tags=("new",)), expected_version=1, now=NOW + 1)


SETUPS["derives"] = derives
SETUPS["moves"] = moves

# name: (setup, the key after "ml:{ns}:", the Redis type written there instead)
WRONG_TYPE: dict[str, tuple[str, str, str]] = {
    "record-hash": ("claims", "m:m2", "string"),
    "record-history": ("claims", "h:m2", "string"),
    "record-claim": ("claims", "c:user:1|city", "hash"),
    "record-events": ("claims", "ev", "string"),
    "record-events-list": ("derives", "ev", "list"),
    "record-claim-group": ("claims", "cg:user:1|city", "string"),
    "record-claim-peers": ("claims", "cp:user:1|city", "string"),
    "record-claim-peers-set": ("claims", "cp:user:1|city", "set"),
    "record-claim-revivals": ("claims", "cr", "hash"),
    "record-statistics": ("claims", "src", "string"),
    "record-member": ("claims", "m:m1", "string"),
    "record-review": ("claims", "rv", "set"),
    "record-rate-counter": ("derives", "w:calls", "string"),
    "record-dependency": ("derives", "m:p", "list"),
    "record-dependency-derivations": ("derives", "d:p", "string"),
    "record-holder": ("supersedes", "m:h", "string"),
    "record-holder-derivations": ("supersedes", "d:h", "set"),
    "record-holder-history": ("supersedes", "h:h", "string"),
    "record-descendant": ("supersedes", "m:d1", "string"),
    "record-descendant-derivations": ("supersedes", "d:d1", "hash"),
    "record-descendant-history": ("supersedes", "h:d2", "string"),
    "record-write-counter": ("supersedes", "cw", "hash"),
    "revise-hash": ("moves", "m:r", "string"),
    "revise-history": ("moves", "h:r", "string"),
    "revise-derivations": ("moves", "d:r", "string"),
    "revise-epoch": ("moves", "e", "hash"),
    "revise-events": ("moves", "ev", "string"),
    "revise-review": ("moves", "rv", "string"),
    "revise-versions": ("moves", "vs:r", "string"),
    "revise-dependency": ("moves", "m:b", "string"),
    "revise-added-derivations": ("moves", "d:b", "string"),
    "revise-removed-derivations": ("moves", "d:a", "zset"),
    "revise-descendant": ("moves", "m:k1", "string"),
    "revise-descendant-derivations": ("moves", "d:k1", "string"),
    "revise-descendant-history": ("moves", "h:k2", "string"),
    "revise-write-counter": ("moves", "cw", "list"),
}


@pytest.mark.parametrize("name", list(WRONG_TYPE))
def test_a_key_of_another_type_fails_the_whole_record_or_revision(
    store: LineageStore, raw: Raw, name: str
) -> None:
    setup, suffix, kind = WRONG_TYPE[name]
    call = SETUPS[setup](store)
    refused_over(raw, NS, f"ml:{{{NS}}}:{suffix}", kind, lambda: call(store))
    call(store)  # mended: the same call goes through
    if setup == "supersedes":
        assert store.get(NS, "d2").status == Status.PENDING_VERIFICATION
    if setup == "moves":
        assert store.get(NS, "r").dependencies == ("b",)
        assert store.get(NS, "k2").status == Status.PENDING_VERIFICATION

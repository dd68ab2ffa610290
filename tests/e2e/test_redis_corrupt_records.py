"""A damaged memory record on Redis (its hash ``ml:{ns}:m:<id>`` or its status history
``ml:{ns}:h:<id>``), written with redis-py straight into a real redis-server under a
real `memlineage serve`: every call that reads the memory (Check, Explain, FilterRank
with it among the candidates, Record replayed on its id) answers DATA_LOSS with a
message naming the key and the field (never the raw ``ValueError`` /
``UnicodeDecodeError`` of the decoding, so never UNKNOWN or INTERNAL, and never the
damage served as if it were true: a missing status taken for ``active``, a NaN
confidence scored), nothing in Redis is changed, and the sidecar goes on serving the
namespace's other memories and the other namespaces."""

from __future__ import annotations

import pytest
import redis
from memlineage.client import MemLineageClient
from memlineage.v1 import memlineage_pb2 as pb
from support.corrupt_redis import Served, client, corrupt_redis_fixtures, refused_reading

CREATOR = "user:alice"
MEMO, OTHER = "memo", "other"

# name: (the damaged field of the record hash, its new value (None: deleted), a piece
# of the problem)
RECORD_DAMAGE: dict[str, tuple[str, bytes | None, str]] = {
    "confidence-not-a-number": ("f", b"high", "field 'f' (creator_confidence)"),
    "confidence-nan": ("f", b"nan", "field 'f' (creator_confidence)"),
    "confidence-over-one": ("f", b"5.0", "field 'f' (creator_confidence)"),
    "created-not-a-number": ("w", b"yesterday", "field 'w' (created_at)"),
    "created-infinite": ("w", b"inf", "field 'w' (created_at)"),
    "created-negative": ("w", b"-5", "field 'w' (created_at)"),
    "version-a-float": ("V", b"1.5", "field 'V' (version)"),
    "version-zero": ("V", b"0", "field 'V' (version)"),
    # what Python's int() takes but Redis's HINCRBY refuses: refused at the read
    "version-leading-zero": ("V", b"07", "field 'V' (version) is not an integer ("),
    # past what the store writes (and past int32, the answer's field)
    "version-of-30-digits": ("V", b"9" * 30, "field 'V' (version) is not an integer ("),
    "version-plus-sign": ("V", b"+3", "field 'V' (version)"),
    "access-count-underscore": ("n", b"1_0", "field 'n' (access_count) is not an integer ("),
    "uses-ok-spaced": ("j", b" 2", "field 'j' (uses_ok)"),
    "access-count-a-word": ("n", b"many", "field 'n' (access_count)"),
    "last-access-a-word": ("l", b"noon", "field 'l' (last_access)"),
    "uses-ok-a-float": ("j", b"2.5", "field 'j' (uses_ok)"),
    "status-unknown": ("S", b"bogus", "field 'S' (status)"),
    "creator-kind-unknown": ("k", b"alien", "field 'k' (creator_kind)"),
    "tags-empty": ("g", b"", "field 'g' (tags)"),
    "tags-double-space": ("g", b"a  b", "field 'g' (tags)"),
    "value-not-utf8": ("v", b"\xff\xfe", "field 'v'"),
    "status-missing": ("S", None, "field 'S' (status) is missing"),
    "type-missing": ("t", None, "field 't' (type) is missing"),
    "version-missing": ("V", None, "field 'V' (version) is missing"),
    "created-missing": ("w", None, "field 'w' (created_at) is missing"),
    "creator-missing": ("c", None, "field 'c' (creator_id) is missing"),
}
# name: (the entry pushed onto the status history list, a piece of the problem)
HISTORY_DAMAGE: dict[str, tuple[bytes, str]] = {
    "history-short-entry": (b"1.0\x1factive", "entry 0"),
    "history-time-a-word": (b"noon\x1factive\x1farchived\x1fwhy\x1f", "entry 0"),
    "history-not-utf8": (b"\xff\x1factive\x1farchived\x1fwhy\x1f", "entry 0"),
}


def namespaces() -> list[str]:
    return [f"{s}-r-{n}" for n in [*RECORD_DAMAGE, *HISTORY_DAMAGE] for s in ("corrupt", "healthy")]


served, raw = corrupt_redis_fixtures("redis-corrupt-records", namespaces)


def setup(c: MemLineageClient) -> None:
    """Two memories; the one to damage has a status change in its history."""
    assert c.record(MEMO, creator=CREATOR, tags=["a", "b"]).recorded
    assert c.record(OTHER, creator=CREATOR).recorded


def dump(r: redis.Redis, ns: str) -> tuple[object, ...]:
    """The damaged memory's keys: its hash, derivations and history."""
    base = f"ml:{{{ns}}}"
    return (
        r.hgetall(f"{base}:m:{MEMO}"),
        r.lrange(f"{base}:d:{MEMO}", 0, -1),
        r.lrange(f"{base}:h:{MEMO}", 0, -1),
    )


def served_as_before(c: MemLineageClient) -> None:
    """The namespace's other memory, and calls that do not read the damaged one."""
    assert c.check("read", OTHER).effect == pb.EFFECT_ALLOW
    assert c.explain(OTHER).memory.id == OTHER
    ranked = c.filter_rank([(OTHER, 0.9)])
    assert list(ranked.ranked_ids) == [OTHER], ranked


def expect_data_loss(c: MemLineageClient, key: str, problem: str) -> None:
    for call in (
        lambda: c.check("read", MEMO),
        lambda: c.explain(MEMO),
        lambda: c.filter_rank([(OTHER, 0.9), (MEMO, 0.8)]),
        lambda: c.record(MEMO, creator=CREATOR, tags=["a", "b"]),  # a replay reads it
    ):
        details = refused_reading(key, call)
        assert problem in details, details


@pytest.mark.parametrize("name", list(RECORD_DAMAGE))
def test_a_corrupt_record_hash_is_data_loss_naming_its_key_and_field(
    served: Served, raw: redis.Redis, name: str
) -> None:
    address = served.address
    ns, healthy = f"corrupt-r-{name}", f"healthy-r-{name}"
    field, value, problem = RECORD_DAMAGE[name]
    key = f"ml:{{{ns}}}:m:{MEMO}"
    with client(address, ns) as c, client(address, healthy) as h:
        setup(c)
        setup(h)
        old = raw.hget(key, field)
        if value is None:
            assert raw.hdel(key, field) == 1
        else:
            raw.hset(key, field, value)
        before = dump(raw, ns)

        expect_data_loss(c, key, problem)
        assert dump(raw, ns) == before  # nothing mended, nothing written

        served_as_before(c)
        assert h.check("read", MEMO).effect == pb.EFFECT_ALLOW
        assert h.explain(MEMO).memory.id == MEMO

        if old is None:  # mended: served again
            raw.hdel(key, field)
        else:
            raw.hset(key, field, old)
        assert c.explain(MEMO).memory.id == MEMO
        assert c.check("read", MEMO).effect == pb.EFFECT_ALLOW


@pytest.mark.parametrize("name", list(HISTORY_DAMAGE))
def test_a_corrupt_status_history_entry_is_data_loss_naming_its_key(
    served: Served, raw: redis.Redis, name: str
) -> None:
    address = served.address
    ns, healthy = f"corrupt-r-{name}", f"healthy-r-{name}"
    entry, problem = HISTORY_DAMAGE[name]
    key = f"ml:{{{ns}}}:h:{MEMO}"
    with client(address, ns) as c, client(address, healthy) as h:
        setup(c)
        setup(h)
        raw.rpush(key, entry)
        before = dump(raw, ns)

        details = refused_reading(key, lambda: c.explain(MEMO))  # Explain reads the history
        assert problem in details, details
        assert dump(raw, ns) == before

        served_as_before(c)
        assert h.explain(MEMO).memory.id == MEMO

        raw.delete(key)  # mended (no history): served again
        assert c.explain(MEMO).memory.id == MEMO

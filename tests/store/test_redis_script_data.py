"""The Redis store's scripts meeting a damaged stored number (written with redis-py
after the memories were stored, as damage between a caller's strict read and its
script would be), on a real Redis, standalone and Cluster: ``StoreCorruptError``
naming the key and the field (DATA_LOSS to a caller), never the raw
``redis.ResponseError``; nothing written (the scripts check what they add to before
their first write: before, a status change had written the status, a feedback the
first records' counts, every writing script its change before the write counter
refused); a cascade marks a descendant whose version is damaged and leaves the version.
The Lua error texts matched in ``redis_base._DATA_ERROR`` are Redis's own (the last
test). A key of another Redis type than the store keeps there (a string where a list,
stream, zset or hash is) is ``StoreCorruptError`` naming it, and every key of the
namespace is byte for byte as it was: before, a status change, an update or an
add_dependencies wrote the change before its command on the key met WRONGTYPE, and a
review scheduled the earlier records before a later one's hash refused it."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis
from memlineage.lineage.errors import StoreCorruptError
from memlineage.lineage.model import Status
from memlineage.store import LineageStore
from memlineage.store.redis_base import _DATA_ERROR
from support.memories import NOW, memory
from support.wrong_type import namespace_keys, refused_over

NS = "nums"
pytestmark = pytest.mark.parametrize("backend", ["redis", "cluster"])


def key(memory_id: str) -> str:
    return f"ml:{{{NS}}}:m:{memory_id}"


def state(raw: redis.Redis) -> dict[str, object]:
    out: dict[str, object] = {}
    for m in ("a", "b", "c"):
        out[key(m)] = raw.hgetall(key(m))
        out[f"h:{m}"] = raw.lrange(f"ml:{{{NS}}}:h:{m}", 0, -1)
    out["src"] = raw.hgetall(f"ml:{{{NS}}}:src")
    out["cw"] = raw.get(f"ml:{{{NS}}}:cw")
    out["ca"] = raw.get(f"ml:{{{NS}}}:ca")
    out["ev"] = raw.xlen(f"ml:{{{NS}}}:ev")
    out["e"] = raw.get(f"ml:{{{NS}}}:e")
    out["d:a"] = raw.lrange(f"ml:{{{NS}}}:d:a", 0, -1)
    return out


def stored(store: LineageStore) -> redis.Redis:
    store.record(memory("a", ns=NS), now=NOW)
    store.record(memory("b", "a", ns=NS), now=NOW)
    store.record(memory("c", "b", ns=NS), now=NOW)
    store.record_accesses(NS, {"a": (1, NOW)})
    return store.client  # type: ignore[attr-defined, no-any-return]


# name: (key, field, value, the call)
CALLS = {
    "revoke": lambda s: s.revoke(NS, "a", now=NOW + 1),
    "set_status": lambda s: s.set_status(NS, "c", Status.ARCHIVED, now=NOW + 1),
    "update": lambda s: s.update(NS, "c", 1, {"context_id": "x"}, now=NOW + 1),
    "feedback": lambda s: s.feedback(NS, ["a", "b", "c"], True, now=NOW + 1),
    "access": lambda s: s.record_accesses(NS, {"a": (1, NOW + 1), "c": (2, NOW + 1)}),
    "add_dependencies": lambda s: s.add_dependencies(
        NS, "c", ["a"], expected_version=1, now=NOW + 1
    ),
}
DAMAGE = {
    "version-revoke": ("a", "V", "07", "revoke"),
    "version-set-status": ("c", "V", "x", "set_status"),
    "version-update": ("c", "V", "+1", "update"),
    "uses-ok": ("c", "j", "2.5", "feedback"),
    "access-count": ("c", "n", "007", "access"),
    "last-access": ("c", "l", "noon", "access"),
    "write-counter": ("cw", "", "lots", "revoke"),
    "access-counter": ("ca", "", "lots", "access"),
    "source-statistic": ("src", "user:alice|ok", "many", "feedback"),
    "graph-epoch": ("e", "", "07", "add_dependencies"),
}


@pytest.mark.parametrize("name", list(DAMAGE))
def test_a_damaged_number_is_store_corrupt_and_nothing_is_written(
    store: LineageStore, name: str
) -> None:
    raw = stored(store)
    where, field, value, call = DAMAGE[name]
    k = key(where) if where in ("a", "b", "c") else f"ml:{{{NS}}}:{where}"
    if field:
        raw.hset(k, field, value)
    else:
        raw.set(k, value)
    before = state(raw)
    with pytest.raises(StoreCorruptError) as err:
        CALLS[call](store)
    message = str(err.value)
    assert err.value.grpc_status == "DATA_LOSS"
    assert message.startswith(f"redis {k} cannot be read: "), message
    assert f"field {field!r}" in message or not field, message
    assert "nothing was changed" in message, message
    assert state(raw) == before


def test_a_cascade_marks_a_descendant_whose_version_is_damaged(
    store: LineageStore, caplog: pytest.LogCaptureFixture
) -> None:
    raw = stored(store)
    raw.hset(key("b"), "V", "1.5")
    with caplog.at_level(logging.ERROR, "memlineage.store"):
        out = store.revoke(NS, "a", now=NOW + 1)
    assert list(out.affected) == ["b", "c"]
    assert raw.hget(key("b"), "S") == "pending_verification"
    assert raw.hget(key("b"), "V") == "1.5"
    assert raw.hget(key("c"), "S") == "pending_verification"
    assert raw.hget(key("c"), "V") == "2"
    assert any(key("b") in r.getMessage() for r in caplog.records), caplog.records


def test_redis_words_its_data_errors_as_matched(store: LineageStore) -> None:
    raw = stored(store)
    raw.hset(key("a"), mapping={"n": "many", "f": "x"})
    scripts = [
        "return redis.call('HINCRBY', KEYS[1], 'n', 1)",
        "return redis.call('HINCRBYFLOAT', KEYS[1], 'f', 1)",
        "return redis.call('INCR', KEYS[1])",
        "return tonumber(redis.call('HGET', KEYS[1], 'f')) + 1",
        "return tonumber(redis.call('HGET', KEYS[1], 'f')) < 1",
        "return 'x' .. redis.call('HGET', KEYS[1], 'none')",
        "return cjson.decode(redis.call('HGET', KEYS[1], 'f'))",
    ]
    for text in scripts:
        with pytest.raises(redis.ResponseError) as err:
            raw.eval(text, 1, key("a"))
        assert _DATA_ERROR.search(str(err.value)), str(err.value)
    with pytest.raises(redis.ResponseError) as err:  # a script's own bug is not data
        raw.eval("return nosuch()", 1, key("a"))
    assert not _DATA_ERROR.search(str(err.value))


CALLS["archive"] = lambda s: s.set_status(NS, "c", Status.ARCHIVED, now=NOW + 1)
CALLS["count"] = lambda s: s.incr_counter(NS, "calls", now=NOW + 1)
CALLS["schedule"] = lambda s: s.schedule_review(NS, {"a": NOW + 9, "c": NOW + 9}, now=NOW + 1)

# name: (the key after "ml:{ns}:", the Redis type written there instead, the call)
WRONG_TYPE = {
    "status-derivations": ("d:a", "string", "revoke"),
    "status-history": ("h:c", "string", "archive"),
    "status-events": ("ev", "list", "archive"),
    "status-record": ("m:c", "string", "archive"),
    "update-derivations": ("d:c", "set", "update"),
    "update-history": ("h:c", "string", "update"),
    "update-events": ("ev", "string", "update"),
    "dependencies-history": ("h:c", "string", "add_dependencies"),
    "dependencies-derivations": ("d:c", "string", "add_dependencies"),
    "dependencies-new-derivations": ("d:a", "hash", "add_dependencies"),
    "dependencies-events": ("ev", "zset", "add_dependencies"),
    "dependencies-epoch": ("e", "hash", "add_dependencies"),
    "access-record": ("m:c", "string", "access"),
    "access-counter": ("ca", "hash", "access"),
    "feedback-record": ("m:c", "list", "feedback"),
    "feedback-statistics": ("src", "string", "feedback"),
    "rate-counter": ("w:calls", "string", "count"),
    "schedule-record": ("m:c", "string", "schedule"),
    "schedule-review": ("rv", "string", "schedule"),
}


def dump(raw: redis.Redis) -> dict[Any, bytes | None]:
    """Every key of the namespace (one slot: its hash tag) as DUMP serialises it."""
    return namespace_keys(raw, NS)


@pytest.mark.parametrize("name", list(WRONG_TYPE))
def test_a_key_of_another_type_is_store_corrupt_and_nothing_is_written(
    store: LineageStore, name: str
) -> None:
    raw = stored(store)
    suffix, kind, call = WRONG_TYPE[name]
    refused_over(raw, NS, f"ml:{{{NS}}}:{suffix}", kind, lambda: CALLS[call](store))
    CALLS[call](store)  # mended: the same call goes through

"""A key of another Redis type than the store keeps there, met by the Redis store's
reads and writes outside Record and Revise (tests/store/test_redis_script_data.py
and test_redis_record_script_data.py cover those), on a real Redis, standalone and
Cluster: ``StoreCorruptError`` (DATA_LOSS) naming the key, and every key of the
namespace byte for byte as it was (DUMP). Before, each was a raw ``ResponseError``
(INTERNAL), or worse: a proposal's save wrote its hash before its event met the
stream, a grant was kept in a namespace whose uses hash is of another type, the write
and access counters read a key of another type as absent (MGET), a supersession took a
key of another type for its successor, a cascade chunk marked its first descendants
before meeting a later one's key, and the namespace registry's WRONGTYPE came after
the memory was recorded without saying so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from memlineage.lineage.decisions import KeptDecision
from memlineage.lineage.errors import StoreCorruptError
from memlineage.lineage.grants import GrantRecord
from memlineage.lineage.model import Status
from memlineage.store import LineageStore
from support.memories import NOW, memory
from support.proposals import stale_at_now
from support.wrong_type import namespace_keys, refused_over, retype

StoreFactory = Callable[..., LineageStore]  # tests/store/conftest.py's make_store
NS = "typed"
REGISTRY = "ml:namespaces"
pytestmark = pytest.mark.parametrize("backend", ["redis", "cluster"])


def key(suffix: str) -> str:
    return f"ml:{{{NS}}}:{suffix}"


def dump(raw: redis.Redis) -> dict[Any, bytes | None]:
    """Every key of the namespace and the namespace registry, as DUMP serialises them."""
    return namespace_keys(raw, NS, (REGISTRY,))


def raw_of(store: LineageStore) -> redis.Redis:
    return store.client  # type: ignore[attr-defined, no-any-return]


def decision(decision_id: str) -> KeptDecision:
    return KeptDecision(decision_id, NS, "read", ("a",), "user:u", NOW, "v", "allow", "{}")


def stored(store: LineageStore) -> None:
    """Memories a, b (on a), c (on b); a grant spent once; a kept decision; a's
    proposal with its event; every counter."""
    store.record(memory("a", ns=NS), now=NOW)
    store.record(memory("b", "a", ns=NS), now=NOW)
    store.record(memory("c", "b", ns=NS), now=NOW)
    store.record_accesses(NS, {"a": (1, NOW)})
    grant = GrantRecord("g-1", NS, "user:u", ("send",), source="tool:*", uses=3)
    store.put_grant(grant, now=NOW)
    assert store.use_grants(NS, ["g-1"], now=NOW)
    store.keep_decisions(NS, [decision("d-1")])
    store.save_proposal(stale_at_now(NS, "a"), "proposed", now=NOW)


CALLS: dict[str, Callable[[LineageStore], object]] = {
    "put_grant": lambda s: s.put_grant(
        GrantRecord("g-2", NS, "user:u", ("send",), source="tool:*"), now=NOW
    ),
    "grants": lambda s: s.grants(NS),
    "use_grants": lambda s: s.use_grants(NS, ["g-1"], now=NOW),
    "latest_cursor": lambda s: s.latest_cursor(NS),
    "keep_decisions": lambda s: s.keep_decisions(NS, [decision("d-2")]),
    "kept_decision": lambda s: s.kept_decision(NS, "d-1"),
    "kept_decisions": lambda s: s.kept_decisions(NS, "a", 5),
    "decisions_kept": lambda s: s.decisions_kept(NS),  # type: ignore[attr-defined]
    "save_proposal": lambda s: s.save_proposal(stale_at_now(NS, "b"), "proposed", now=NOW),
    "proposal": lambda s: s.proposal(NS, "a"),
    "proposals": lambda s: s.proposals(NS, ["a", "b"]),
    "drop_proposal": lambda s: s.drop_proposal(NS, "a"),
    "epochs": lambda s: s.epochs(NS),
    "supersede": lambda s: s.supersede(NS, "c", "z", now=NOW + 1),
}

# name: (the key after "ml:{ns}:", the Redis type written there instead, the call)
WRONG_TYPE = {
    "put-grant-grants": ("g", "string", "put_grant"),
    "put-grant-uses": ("gu", "string", "put_grant"),
    "read-grants-grants": ("g", "list", "grants"),
    "read-grants-uses": ("gu", "string", "grants"),
    "use-grants-grants": ("g", "string", "use_grants"),
    "use-grants-uses": ("gu", "zset", "use_grants"),
    "latest-cursor-events": ("ev", "string", "latest_cursor"),
    "keep-decisions-stream": ("dec", "string", "keep_decisions"),
    "keep-decisions-index": ("dix", "string", "keep_decisions"),
    "kept-decision-stream": ("dec", "hash", "kept_decision"),
    "kept-decision-index": ("dix", "string", "kept_decision"),
    "kept-decisions-stream": ("dec", "list", "kept_decisions"),
    "decisions-kept-stream": ("dec", "string", "decisions_kept"),
    "save-proposal-hash": ("pp", "string", "save_proposal"),
    "save-proposal-events": ("ev", "string", "save_proposal"),
    "read-proposal": ("pp", "string", "proposal"),
    "read-proposals": ("pp", "list", "proposals"),
    "drop-proposal": ("pp", "set", "drop_proposal"),
    "epochs-write-counter": ("cw", "hash", "epochs"),
    "epochs-access-counter": ("ca", "list", "epochs"),
    "supersede-successor": ("m:z", "string", "supersede"),
}


@pytest.mark.parametrize("name", list(WRONG_TYPE))
def test_a_key_of_another_type_is_store_corrupt_and_nothing_is_written(
    store: LineageStore, name: str
) -> None:
    stored(store)
    raw = raw_of(store)
    suffix, kind, call = WRONG_TYPE[name]
    refused_over(raw, NS, key(suffix), kind, lambda: CALLS[call](store), (REGISTRY,))
    # mended: the same call goes through
    if call == "supersede":
        store.record(memory("z", ns=NS), now=NOW)
    CALLS[call](store)


def test_a_registry_of_another_type_fails_the_record_after_it_is_written(
    store: LineageStore,
) -> None:
    """The namespace registry lives outside the namespace's slot: the record's script
    cannot check it, so its SADD meets the key after the record is written, and says
    so; once mended, the same Record again registers the namespace."""
    raw = raw_of(store)
    retype(raw, REGISTRY, "string")
    rec = memory("a", ns=NS)
    with pytest.raises(StoreCorruptError) as err:
        store.record_claim(rec, now=NOW)
    message = str(err.value)
    assert err.value.grpc_status == "DATA_LOSS"
    assert message.startswith(f"redis {REGISTRY} cannot be read: it holds a Redis string, ")
    assert "the memory was recorded, its namespace not added to the registry" in message
    assert store.get(NS, "a").id == "a"
    assert raw.get(REGISTRY) == "x"

    raw.delete(REGISTRY)
    assert store.namespaces() == []
    assert store.record_claim(rec, now=NOW).replayed
    assert store.namespaces() == [NS]


# A cascade chunk reads every node's record hash and derivations first, then checks the
# history list of each node it marks and the event stream: a key of another type among
# them fails the chunk before its first write. Before, the chunk had marked the nodes
# ahead of the one whose key refused its command.
CASCADE = {
    "history": ("h:d", "string"),
    "record": ("m:d", "string"),
    "derivations": ("d:d", "hash"),
}


@pytest.mark.parametrize("name", list(CASCADE))
def test_a_cascade_chunk_meeting_a_key_of_another_type_writes_nothing(
    make_store: StoreFactory, name: str
) -> None:
    store = make_store(cascade_chunk=2)
    store.record(memory("r", ns=NS), now=NOW)
    for child in "abcd":  # the cascade's chunks: [a, b], then [c, d]
        store.record(memory(child, "r", ns=NS), now=NOW)
    raw = raw_of(store)
    suffix, kind = CASCADE[name]
    k = key(suffix)
    old = raw.dump(k)
    retype(raw, k, kind)
    chunk = [key(f"{part}:{node}") for node in "cd" for part in ("m", "d", "h")]
    before = {c: raw.dump(c) for c in chunk}

    with pytest.raises(StoreCorruptError) as err:
        store.revoke(NS, "r", now=NOW + 1)
    assert {c: raw.dump(c) for c in chunk} == before  # nothing of the failed chunk
    message = str(err.value)
    assert err.value.grpc_status == "DATA_LOSS"
    assert message.startswith(f"redis {k} cannot be read: it holds a Redis {kind}, "), message
    assert "the change of 'r' is kept, and so are the 2 descendants" in message, message
    assert raw.hget(key("m:r"), "S") == "revoked"
    assert [raw.hget(key(f"m:{n}"), "S") for n in "ab"] == ["pending_verification"] * 2
    ((_, last),) = raw.xrevrange(key("ev"), count=1)
    assert (last["t"], last["x"]) == ("cascaded", "a b")  # the first chunk's event only

    raw.delete(k)  # mended: the remedy goes through
    if old is not None:
        raw.restore(k, 0, old)
    for node in "cd":
        store.set_status(NS, node, Status.PENDING_VERIFICATION, now=NOW + 2)
    assert {store.get(NS, n).status for n in "abcd"} == {Status.PENDING_VERIFICATION}


def test_a_stream_retyped_while_a_watcher_waits_is_store_corrupt_naming_it(
    store: LineageStore,
) -> None:
    """The page read finds nothing new, then the stream becomes another type before the
    blocking XREAD: the XREAD's WRONGTYPE is DATA_LOSS naming the stream (the fault is
    put between the two steps by wrapping the page read of this one store)."""
    stored(store)
    raw = raw_of(store)
    stream = key("ev")
    cursor = store.latest_cursor(NS)
    page = store._events  # type: ignore[attr-defined]

    def then_retype(*args: Any) -> Any:
        out = page(*args)
        retype(raw, stream, "string")
        return out

    store._events = then_retype  # type: ignore[attr-defined]
    with pytest.raises(StoreCorruptError) as err:
        store.wait_events(NS, after=cursor, timeout=5.0)
    assert err.value.grpc_status == "DATA_LOSS"
    assert str(err.value).startswith(f"redis {stream} cannot be read: it holds a Redis string, ")

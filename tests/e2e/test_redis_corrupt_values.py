"""A damaged value in a namespace's grants (``ml:{ns}:g``, ``ml:{ns}:gu``) or proposals
(``ml:{ns}:pp``) hash on Redis, written with redis-py straight into a real
redis-server under a real `memlineage serve`: the calls that read it (an act with
arguments and Explain read the grants; Object and Explain read the proposal) answer
DATA_LOSS with a message naming the key and the field (never the raw
``JSONDecodeError`` / ``KeyError`` / ``TypeError`` of the decoding, so never UNKNOWN
or INTERNAL), nothing in Redis is changed, and the sidecar goes on serving the other
namespaces (and the damaged namespace's calls that do not read the value)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import redis
from memlineage.client import MemLineageClient
from memlineage.lineage.clock import system_clock
from memlineage.v1 import memlineage_pb2 as pb
from support.corrupt_redis import (
    Served,
    client,
    const,
    corrupt_redis_fixtures,
    json_edit,
    refused,
    refused_reading,
    snapshot,
)
from support.proposals import OWNER, pending_for_an_hour

PROMPT, BILL = "prompt", "bill"
PAY = {"recipient": [PROMPT], "amount": [BILL]}  # the amount needs the grant on `bill`


def namespaces() -> list[str]:
    """Each case's damaged namespace and the healthy one beside it."""
    out = ["corrupt-g-field-name"]
    for kind, cases in (("g", GRANT_DAMAGE), ("p", PROPOSAL_DAMAGE)):
        out += [f"{state}-{kind}-{name}" for name in cases for state in ("corrupt", "healthy")]
    return out


served, raw = corrupt_redis_fixtures("redis-corrupt", namespaces)


def setup_grant(c: MemLineageClient) -> str:
    """The user's prompt, a bill read by a tool, and the user's grant letting the bill
    fill the amount of send_money three times; one payment made (one use spent)."""
    assert c.record(PROMPT, creator="user:alice").recorded
    assert c.record(BILL, creator="tool:read_file", type="tool_result").recorded
    g = c.grant(["send_money"], memory_id=BILL, arguments=["amount"], uses=3)
    assert c.act("send_money", PAY).effect == pb.EFFECT_ALLOW
    return str(g.id)


def pays(c: MemLineageClient, gid: str) -> None:
    d = c.act("send_money", PAY)
    assert d.effect == pb.EFFECT_ALLOW and list(d.grants_used) == [gid], d


# name: (the hash, the new value from the old, a piece of the problem)
GRANT_DAMAGE: dict[str, tuple[str, Callable[[bytes], bytes], str]] = {
    "not-json": ("g", const(b'["g-1","tenant'), "is not valid JSON"),
    "nested-past-the-parser": ("g", const(b"[" * 5000), "nested deeper than the parser goes"),
    "truncated": ("g", lambda t: t[: len(t) // 2], "is not valid JSON"),
    "not-utf8": ("g", const(b"\xff\xfe[\x00\x81"), "not UTF-8"),
    "an-object": ("g", const(b'{"id": "g-1"}'), "not a list"),
    "too-short": ("g", lambda t: json.dumps(json.loads(t)[:5]).encode(), "has 5 fields"),
    "uses-a-string": ("g", json_edit(7, "many"), "field 7 (uses)"),
    "actions-a-number": ("g", json_edit(3, 7), "field 3 (actions)"),
    "created-null": ("g", json_edit(10, None), "field 10 (created_at)"),
    "created-past-a-float": ("g", json_edit(10, 10**400), "field 10 (created_at)"),
    "issuer-an-object": ("g", json_edit(2, {"k": 1}), "field 2 (issuer)"),
    "another-id": ("g", json_edit(0, "g-other"), "holds the grant id 'g-other'"),
    "used-not-a-number": ("gu", const(b"lots"), "is not a count of uses"),
    "used-over-uses": ("gu", const(b"4"), "is 4, over the grant's uses 3"),
}


@pytest.mark.parametrize("name", list(GRANT_DAMAGE))
def test_a_corrupt_grant_is_data_loss_naming_its_key_and_field(
    served: Served, raw: redis.Redis, name: str
) -> None:
    address = served.address
    ns, healthy = f"corrupt-g-{name}", f"healthy-g-{name}"
    suffix, damage, problem = GRANT_DAMAGE[name]
    key = f"ml:{{{ns}}}:{suffix}"
    with client(address, ns) as c, client(address, healthy) as h:
        gid = setup_grant(c)
        other = setup_grant(h)
        old = raw.hget(key, gid)
        assert old is not None
        raw.hset(key, gid, damage(old))
        before = {k: snapshot(raw, k) for k in (f"ml:{{{ns}}}:g", f"ml:{{{ns}}}:gu")}

        for call in (lambda: c.act("send_money", PAY), lambda: c.explain(BILL)):
            details = refused_reading(key, call)
            assert f"field {gid!r}" in details and problem in details, details
        assert {k: snapshot(raw, k) for k in before} == before  # nothing spent or mended

        # the damaged namespace's calls that do not read its grants, and the others
        assert c.act("send_money", relies_on=[PROMPT]).effect == pb.EFFECT_ALLOW
        assert c.check("read", PROMPT).effect == pb.EFFECT_ALLOW
        pays(h, other)
        assert h.explain(BILL).grants[0].used == 2

        raw.hset(key, gid, old)  # mended: served again, with its uses
        pays(c, gid)
        (shown,) = c.explain(BILL).grants
        assert (shown.id, shown.uses, shown.used) == (gid, 3, 2)


def test_a_grant_under_a_field_name_that_is_not_utf8_is_data_loss(
    served: Served, raw: redis.Redis
) -> None:
    address = served.address
    ns = "corrupt-g-field-name"
    key = f"ml:{{{ns}}}:g"
    with client(address, ns) as c:
        gid = setup_grant(c)
        raw.hset(key, b"\xffg", raw.hget(key, gid) or b"")
        details = refused(lambda: c.act("send_money", PAY))
        assert details.startswith(f"redis {key} cannot be read: the field name "), details
        assert "is not UTF-8" in details, details
        raw.hdel(key, b"\xffg")
        pays(c, gid)


PROPOSAL_DAMAGE: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "not-json": (const(b'["memo",'), "is not valid JSON"),
    "nested-past-the-parser": (const(b"[" * 5000), "nested deeper than the parser goes"),
    "not-utf8": (const(b"\xff\xfe[\x00\x81"), "not UTF-8"),
    "empty": (const(b""), "is not valid JSON"),
    "a-number": (const(b"42"), "not a list"),
    "too-short": (lambda t: json.dumps(json.loads(t)[:9]).encode(), "has 9 fields"),
    "deadline-a-string": (json_edit(7, "soon"), "field 7 (deadline)"),
    "owners-a-string": (json_edit(5, OWNER), "field 5 (owners)"),
    "objections-null": (json_edit(9, None), "field 9 (objections)"),
    "objection-short": (json_edit(9, [[1.0, OWNER]]), "objection 0"),
    "state-unknown": (json_edit(8, "decided"), "field 8 (state)"),
    "another-memory": (json_edit(0, "other"), "holds the memory 'other'"),
}


@pytest.mark.parametrize("name", list(PROPOSAL_DAMAGE))
def test_a_corrupt_proposal_is_data_loss_naming_its_key_and_field(
    served: Served, raw: redis.Redis, name: str
) -> None:
    address = served.address
    ns, healthy = f"corrupt-p-{name}", f"healthy-p-{name}"
    damage, problem = PROPOSAL_DAMAGE[name]
    key = f"ml:{{{ns}}}:pp"
    memo = "memo"
    with client(address, ns) as c, client(address, healthy) as h:
        for n, cl in ((ns, c), (healthy, h)):
            assert cl.record(memo, creator=OWNER).recorded
            # the proposal the sweep would have saved (it would also emit `proposed`)
            raw.hset(f"ml:{{{n}}}:pp", memo, pending_for_an_hour(n, memo, system_clock()).to_json())
        good = raw.hget(key, memo)
        assert good is not None
        raw.hset(key, memo, damage(good))
        before = snapshot(raw, key)

        for call in (
            lambda: c.object_to(memo, "still needed", actor=OWNER),
            lambda: c.explain(memo),
        ):
            details = refused_reading(key, call)
            assert f"field {memo!r}" in details and problem in details, details
        assert snapshot(raw, key) == before

        assert c.check("read", memo).effect == pb.EFFECT_ALLOW
        assert h.object_to(memo, "still needed", actor=OWNER).proposal.state == "postponed"
        assert h.explain(memo).proposal.state == "postponed"

        raw.hset(key, memo, good)  # mended: heard again
        assert c.object_to(memo, "still needed", actor=OWNER).proposal.state == "postponed"

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
from collections.abc import Callable, Iterator

import grpc
import pytest
import redis
from memlineage.client import MemLineageClient, MemLineageError
from memlineage.lineage.clock import system_clock
from memlineage.lineage.proposals import Proposal
from memlineage.v1 import memlineage_pb2 as pb
from support.redis_servers import RedisServer, start_redis_server
from support.serve_process import ServeProcess
from support.sidecar import BUNDLED_POLICIES

PROMPT, BILL, OWNER = "prompt", "bill", "agent:planner"
PAY = {"recipient": [PROMPT], "amount": [BILL]}  # the amount needs the grant on `bill`
TOKEN = "tok"


def namespaces() -> list[str]:
    """Each case's damaged namespace and the healthy one beside it."""
    out = ["corrupt-g-field-name"]
    for kind, cases in (("g", GRANT_DAMAGE), ("p", PROPOSAL_DAMAGE)):
        out += [f"{state}-{kind}-{name}" for name in cases for state in ("corrupt", "healthy")]
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RedisServer, str]]:
    """One redis-server of the module's own and `memlineage serve` over it."""
    server = start_redis_server(tmp_path_factory.mktemp("redis-corrupt"))
    try:
        sidecar = ServeProcess(
            ["--store", server.url, "--policies", BUNDLED_POLICIES],
            env={"MEMLINEAGE_TOKENS": f"{TOKEN}={','.join(namespaces())}"},
        )
        try:
            yield server, sidecar.address
        finally:
            assert sidecar.proc.poll() is None, "the sidecar died"
            sidecar.stop()
    finally:
        server.stop()


@pytest.fixture
def raw(served: tuple[RedisServer, str]) -> Iterator[redis.Redis]:
    r = served[0].client(socket_timeout=5)  # bytes: the damage is written as it is
    try:
        yield r
    finally:
        r.close()


def client(address: str, ns: str) -> MemLineageClient:
    return MemLineageClient(address, token=TOKEN, namespace=ns, timeout=10, retries=0)


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


def refused(call: Callable[[], object]) -> str:
    """The call's DATA_LOSS details (any other answer fails the test)."""
    with pytest.raises(MemLineageError) as err:
        call()
    assert err.value.code == grpc.StatusCode.DATA_LOSS, (err.value.code, err.value.details)
    details = str(err.value.details)
    assert "Traceback" not in details and "\n" not in details, details
    return details


def snapshot(r: redis.Redis, key: str) -> dict[bytes, bytes]:
    return dict(r.hgetall(key))


def _edit(index: int, value: object) -> Callable[[bytes], bytes]:
    def edit(text: bytes) -> bytes:
        v = json.loads(text)
        v[index] = value
        return json.dumps(v).encode()

    return edit


def _const(value: bytes) -> Callable[[bytes], bytes]:
    return lambda _text: value


# name: (the hash, the new value from the old, a piece of the problem)
GRANT_DAMAGE: dict[str, tuple[str, Callable[[bytes], bytes], str]] = {
    "not-json": ("g", _const(b'["g-1","tenant'), "is not valid JSON"),
    "truncated": ("g", lambda t: t[: len(t) // 2], "is not valid JSON"),
    "not-utf8": ("g", _const(b"\xff\xfe[\x00\x81"), "not UTF-8"),
    "an-object": ("g", _const(b'{"id": "g-1"}'), "not a list"),
    "too-short": ("g", lambda t: json.dumps(json.loads(t)[:5]).encode(), "has 5 fields"),
    "uses-a-string": ("g", _edit(7, "many"), "field 7 (uses)"),
    "actions-a-number": ("g", _edit(3, 7), "field 3 (actions)"),
    "created-null": ("g", _edit(10, None), "field 10 (created_at)"),
    "issuer-an-object": ("g", _edit(2, {"k": 1}), "field 2 (issuer)"),
    "another-id": ("g", _edit(0, "g-other"), "holds the grant id 'g-other'"),
    "used-not-a-number": ("gu", _const(b"lots"), "is not a count of uses"),
    "used-over-uses": ("gu", _const(b"4"), "is 4, over the grant's uses 3"),
}


@pytest.mark.parametrize("name", list(GRANT_DAMAGE))
def test_a_corrupt_grant_is_data_loss_naming_its_key_and_field(
    served: tuple[RedisServer, str], raw: redis.Redis, name: str
) -> None:
    _, address = served
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
            details = refused(call)
            assert details.startswith(f"redis {key} cannot be read: "), details
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
    served: tuple[RedisServer, str], raw: redis.Redis
) -> None:
    _, address = served
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


def proposal(ns: str, memory_id: str) -> Proposal:
    now = system_clock()
    return Proposal(
        memory_id=memory_id,
        namespace=ns,
        from_status="active",
        to_status="archived",
        reason="its value stayed low",
        owners=(OWNER,),
        proposed_at=now,
        deadline=now + 3600,
    )


PROPOSAL_DAMAGE: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "not-json": (_const(b'["memo",'), "is not valid JSON"),
    "not-utf8": (_const(b"\xff\xfe[\x00\x81"), "not UTF-8"),
    "empty": (_const(b""), "is not valid JSON"),
    "a-number": (_const(b"42"), "not a list"),
    "too-short": (lambda t: json.dumps(json.loads(t)[:9]).encode(), "has 9 fields"),
    "deadline-a-string": (_edit(7, "soon"), "field 7 (deadline)"),
    "owners-a-string": (_edit(5, OWNER), "field 5 (owners)"),
    "objections-null": (_edit(9, None), "field 9 (objections)"),
    "objection-short": (_edit(9, [[1.0, OWNER]]), "objection 0"),
    "state-unknown": (_edit(8, "decided"), "field 8 (state)"),
    "another-memory": (_edit(0, "other"), "holds the memory 'other'"),
}


@pytest.mark.parametrize("name", list(PROPOSAL_DAMAGE))
def test_a_corrupt_proposal_is_data_loss_naming_its_key_and_field(
    served: tuple[RedisServer, str], raw: redis.Redis, name: str
) -> None:
    _, address = served
    ns, healthy = f"corrupt-p-{name}", f"healthy-p-{name}"
    damage, problem = PROPOSAL_DAMAGE[name]
    key = f"ml:{{{ns}}}:pp"
    memo = "memo"
    with client(address, ns) as c, client(address, healthy) as h:
        for n, cl in ((ns, c), (healthy, h)):
            assert cl.record(memo, creator=OWNER).recorded
            # the proposal the sweep would have saved (it would also emit `proposed`)
            raw.hset(f"ml:{{{n}}}:pp", memo, proposal(n, memo).to_json())
        good = raw.hget(key, memo)
        assert good is not None
        raw.hset(key, memo, damage(good))
        before = snapshot(raw, key)

        for call in (
            lambda: c.object_to(memo, "still needed", actor=OWNER),
            lambda: c.explain(memo),
        ):
            details = refused(call)
            assert details.startswith(f"redis {key} cannot be read: "), details
            assert f"field {memo!r}" in details and problem in details, details
        assert snapshot(raw, key) == before

        assert c.check("read", memo).effect == pb.EFFECT_ALLOW
        assert h.object_to(memo, "still needed", actor=OWNER).proposal.state == "postponed"
        assert h.explain(memo).proposal.state == "postponed"

        raw.hset(key, memo, good)  # mended: heard again
        assert c.object_to(memo, "still needed", actor=OWNER).proposal.state == "postponed"

"""The act gate through a real sidecar, on the embedded store, a real redis-server
and a real Redis Cluster: an injected recipient is denied; a user-granted file fills
the amount once and the second payment on that grant is denied; a grant recorded by
a tool changes nothing; concurrent acts on one single-use grant allow exactly one;
an expired grant is inert; allowed actions are counted by `acts()`; a namespace full
of live grants answers RESOURCE_EXHAUSTED."""

from __future__ import annotations

import hashlib
import shutil
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from memlineage.client import ActArg, MemLineageClient, MemLineageError
from memlineage.config import Config, TokenGrant
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.grants import GrantRecord
from memlineage.store.grants import MAX_GRANTS_PER_NAMESPACE
from memlineage.v1 import memlineage_pb2 as pb
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

AUTH = (("authorization", "Bearer t"),)
RATE_POLICY = """
actions payments = ["send_money", "schedule_*"]

policy payments_per_hour priority 90 {
  on act
  when request.action in payments and acts(payments, 1h) >= 2
  deny "at most 2 payments an hour"
}
"""


@pytest.fixture(params=["embedded", "redis", "cluster"])
def store_url(request: pytest.FixtureRequest) -> str:
    if request.param == "redis":
        return str(request.getfixturevalue("redis_server").emptied())
    if request.param == "cluster":
        return str(request.getfixturevalue("redis_cluster").url)
    return "embedded"


@pytest.fixture
def policies(tmp_path: Path) -> str:
    """The bundled policies plus a rate rule over allowed payments."""
    out = tmp_path / "policies"
    shutil.copytree(BUNDLED_POLICIES, out)
    (out / "zz_rate.mlp").write_text(RATE_POLICY)
    return str(out)


@pytest.fixture
def sidecar(store_url: str, policies: str) -> Iterator[tuple]:
    clock = ManualClock(T0)
    # A namespace of the test's own: the session's Redis Cluster is shared by the tests
    # (and the rate counters all count at the same manual time).
    ns = f"act-{uuid.uuid4().hex[:12]}"
    config = Config(
        policy_dir=policies,
        store=store_url,
        decision_log="off",
        tokens=(TokenGrant("t", (ns,)),),
    )
    with (
        RunningSidecar(config, clock) as s,
        MemLineageClient(s.address, token="t", namespace=ns, timeout=10) as c,
    ):
        yield s, c, clock


def _trace(c: MemLineageClient) -> tuple[str, str, str]:
    """The user's prompt, a bill read from a file, an email carrying an injection (ids
    unique: the session's cluster is shared by the tests)."""
    suffix = uuid.uuid4().hex[:10]
    prompt, bill, inbox = f"prompt{suffix}", f"bill{suffix}", f"inbox{suffix}"
    c.record(prompt, creator="user:alice")
    c.record(bill, creator="tool:read_file", type="tool_result")
    c.record(inbox, creator="tool:read_inbox", type="tool_result")
    return prompt, bill, inbox


def test_an_injected_recipient_is_denied_and_says_which_argument(sidecar: tuple) -> None:
    _, c, _ = sidecar
    prompt, _, inbox = _trace(c)
    d = c.act("send_money", {"recipient": [inbox], "amount": ActArg([prompt], value="100")})
    assert d.effect == pb.EFFECT_DENY
    why = " ".join(r.message for r in d.reasons)
    assert "argument `recipient`" in why and "tool:read_inbox" in why and inbox in why
    assert "send_money" in why  # the grant that is missing: recipient of send_money
    assert not d.grants_used
    ok = c.act("send_money", {"recipient": [prompt], "amount": [prompt]})
    assert ok.effect == pb.EFFECT_ALLOW


def test_a_granted_file_fills_the_amount_once(sidecar: tuple) -> None:
    _, c, _ = sidecar
    prompt, bill, _ = _trace(c)
    g = c.grant(["send_money"], memory_id=bill, arguments=["amount"], uses=1, actor="user:alice")
    assert g.effective and g.uses == 1 and g.used == 0
    pay = {"recipient": [prompt], "amount": [bill]}
    first = c.act("send_money", pay)
    assert first.effect == pb.EFFECT_ALLOW and list(first.grants_used) == [g.id]
    second = c.act("send_money", pay)
    assert second.effect == pb.EFFECT_DENY and not second.grants_used
    shown = {x.id: x for x in c.explain(bill).grants}
    assert shown[g.id].used == 1 and not shown[g.id].effective


def test_a_grant_recorded_by_a_tool_changes_nothing(sidecar: tuple) -> None:
    _, c, _ = sidecar
    prompt, bill, _ = _trace(c)
    forged = c.grant(["send_*"], source="tool:*", actor="tool:read_file", uses=100)
    assert not forged.effective and forged.issuer.id == "tool:read_file"
    d = c.act("send_money", {"recipient": [prompt], "amount": [bill]})
    assert d.effect == pb.EFFECT_DENY and not d.grants_used
    assert [x.used for x in c.explain(bill).grants if x.id == forged.id] == [0]


def test_concurrent_acts_on_one_single_use_grant_allow_exactly_one(sidecar: tuple) -> None:
    s, c, _ = sidecar
    prompt, bill, _ = _trace(c)
    g = c.grant(["send_money"], memory_id=bill, arguments=["amount"], uses=1)
    start = threading.Barrier(8)
    effects: list[int] = []
    why: list[str] = []
    lock = threading.Lock()

    def pay() -> None:
        with MemLineageClient(s.address, token="t", namespace=c.namespace, timeout=20) as mine:
            start.wait(10)
            d = mine.act("send_money", {"recipient": [prompt], "amount": [bill]})
            with lock:
                effects.append(d.effect)
                why.extend(r.message for r in d.reasons)

    threads = [threading.Thread(target=pay) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(effects) == 8
    assert effects.count(pb.EFFECT_ALLOW) == 1, why
    assert effects.count(pb.EFFECT_DENY) == 7
    assert [x.used for x in c.explain(bill).grants if x.id == g.id] == [1]


def test_an_expired_grant_is_inert(sidecar: tuple) -> None:
    _, c, clock = sidecar
    prompt, bill, _ = _trace(c)
    g = c.grant(["send_money"], memory_id=bill, expires_at=clock() + 60, uses=5)
    pay = {"recipient": [prompt], "amount": [bill]}
    assert c.act("send_money", pay).effect == pb.EFFECT_ALLOW
    clock.advance(61)
    late = c.act("send_money", pay)
    assert late.effect == pb.EFFECT_DENY and not late.grants_used
    shown = next(x for x in c.explain(bill).grants if x.id == g.id)
    assert shown.used == 1 and not shown.effective


def test_an_act_or_a_grant_at_a_stated_time_is_refused(sidecar: tuple) -> None:
    """An act spends grant uses and counts actions for good, so it is decided at the
    server's clock: a stated past time would bring an expired grant back to life, a
    later one would shift a rate window. Refused, INVALID_ARGUMENT `time`, spending
    nothing; a grant's liveness likewise. (Before: three payments on a grant that had
    expired, each at a time just after it was recorded.)"""
    _, c, clock = sidecar
    prompt, bill, _ = _trace(c)
    recorded = clock()
    g = c.grant(["send_money"], memory_id=bill, expires_at=recorded + 60, uses=3)
    clock.advance(120)  # expired
    pay = {"recipient": [prompt], "amount": [bill]}
    for at in (recorded + 1, clock() + 10):
        with pytest.raises(MemLineageError) as err:
            c.act("send_money", pay, at=at)
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.details.startswith("time: a Record, an act or a grant is decided at the")
    assert c.act("send_money", pay).effect == pb.EFFECT_DENY  # at the server's clock
    assert [x.used for x in c.explain(bill).grants if x.id == g.id] == [0]
    with pytest.raises(MemLineageError) as err:
        c.grant(["send_money"], memory_id=bill, expires_at=recorded + 60, at=recorded)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [x.id for x in c.explain(bill).grants] == [g.id]  # nothing recorded


def test_a_creator_kind_and_id_that_disagree_are_refused(sidecar: tuple) -> None:
    """The kind decides whether a user issued a grant or made a memory; the id is what
    policy globs match. An agent stating a `user:` id (before: its grant counted as the
    user's, and the next payment was ALLOWed on it) and a user-kind memory with a `tool:`
    id (before: trusted as the user's) are INVALID_ARGUMENT, and nothing is recorded."""
    _, c, _ = sidecar
    prompt, bill, _ = _trace(c)
    forged = pb.GrantRequest(
        namespace=c.namespace,
        grant=pb.Grant(id="forged", actions=["send_money"], memory_id=bill),
        actor=pb.Actor(kind=pb.CREATOR_KIND_AGENT, id="user:evil"),
    )
    with pytest.raises(grpc.RpcError) as err:
        c._stub.RecordGrant(forged, metadata=AUTH)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith("actor.id: 'user:evil' names the kind user")
    assert c.explain(bill).grants == []
    pay = {"recipient": [prompt], "amount": [bill]}
    assert c.act("send_money", pay).effect == pb.EFFECT_DENY
    note = pb.Memory(id="evil-note", creator=pb.Creator(kind=pb.CREATOR_KIND_USER, id="tool:evil"))
    with pytest.raises(grpc.RpcError) as err:
        c._stub.Record(pb.RecordRequest(namespace=c.namespace, memory=note), metadata=AUTH)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith("memory.creator.id: 'tool:evil' names the kind tool")
    with pytest.raises(MemLineageError) as missing:
        c.explain("evil-note")
    assert missing.value.code == grpc.StatusCode.NOT_FOUND
    # in any case: source lists and priors compare ids case-folded, so an agent's
    # `TOOL:flight_api` would pass for the trusted tool (a review of the spelling rule)
    upper = pb.Memory(id="upper", creator=pb.Creator(kind=pb.CREATOR_KIND_AGENT, id="TOOL:x"))
    with pytest.raises(grpc.RpcError) as err:
        c._stub.Record(pb.RecordRequest(namespace=c.namespace, memory=upper), metadata=AUTH)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith("memory.creator.id: 'TOOL:x' names the kind tool")


def test_a_granted_payee_needs_a_confirmation(sidecar: tuple) -> None:
    _, c, _ = sidecar
    prompt, bill, _ = _trace(c)
    c.grant(["send_money"], memory_id=bill, arguments=["recipient", "amount"], uses=1)
    d = c.act("send_money", {"recipient": [bill], "amount": [bill]}, relies_on=[prompt])
    assert d.effect == pb.EFFECT_DEGRADE
    assert [o.kind for o in d.obligations] == ["require_confirmation"]
    assert len(d.grants_used) == 1  # a confirmed payment spends the use too


def test_a_payee_grant_naming_its_value_needs_no_confirmation(sidecar: tuple) -> None:
    """The value a grant names survives the store: that recipient is ALLOWed with no
    confirmation and spends the use; another recipient from the same file is DENYed."""
    _, c, _ = sidecar
    prompt, bill, _ = _trace(c)
    c.grant(["send_money"], memory_id=bill, arguments=["recipient"], uses=1, value="IBAN-7")
    injected = c.act(
        "send_money", {"recipient": ActArg([bill], value="IBAN-666"), "amount": [prompt]}
    )
    assert injected.effect == pb.EFFECT_DENY
    d = c.act("send_money", {"recipient": ActArg([bill], value="IBAN-7"), "amount": [prompt]})
    assert d.effect == pb.EFFECT_ALLOW, d.reasons
    assert not d.obligations
    assert len(d.grants_used) == 1
    again = c.act("send_money", {"recipient": ActArg([bill], value="IBAN-7"), "amount": [prompt]})
    assert again.effect == pb.EFFECT_DENY  # its one use is spent


def test_allowed_payments_are_counted_by_acts(sidecar: tuple) -> None:
    _, c, clock = sidecar
    prompt, _, inbox = _trace(c)
    pay = {"recipient": [prompt], "amount": [prompt]}
    assert c.act("send_money", pay).effect == pb.EFFECT_ALLOW
    # a denied one is not counted
    assert c.act("send_money", {"recipient": [inbox]}).effect == pb.EFFECT_DENY
    assert c.act("schedule_transaction", pay).effect == pb.EFFECT_ALLOW
    third = c.act("send_money", pay)
    assert third.effect == pb.EFFECT_DENY
    assert any(r.policy == "payments_per_hour" for r in third.reasons)
    clock.advance(3601)
    assert c.act("send_money", pay).effect == pb.EFFECT_ALLOW


def test_concurrent_payments_cannot_overshoot_the_rate_limit(sidecar: tuple) -> None:
    """20 payments at once against "at most 2 an hour": exactly 2 allowed, on every
    backend (on Redis the count was read by each before any added itself: 8 and 10
    allowed in an outside audit's runs)."""
    from concurrent.futures import ThreadPoolExecutor

    _, c, _ = sidecar
    prompt, _, _ = _trace(c)
    pay = {"recipient": [prompt], "amount": [prompt]}
    with ThreadPoolExecutor(20) as pool:
        effects = list(pool.map(lambda _: c.act("send_money", pay).effect, range(20)))
    assert effects.count(pb.EFFECT_ALLOW) == 2, effects
    assert effects.count(pb.EFFECT_DENY) == 18


def test_bad_act_and_grant_input_is_a_precise_error(sidecar: tuple) -> None:
    _, c, _ = sidecar
    prompt, _, _ = _trace(c)
    stub = c._stub  # the raw RPCs, to send what the typed client would not build
    legit = "sha256:" + hashlib.sha256(b"bob@example.com").hexdigest()
    cases = [
        (
            stub.Check,
            pb.CheckRequest(
                namespace=c.namespace,
                operation=pb.OPERATION_ACT,
                action="send_money",
                arguments=[pb.ActArgument(name="to", sources=[prompt])] * 2,
            ),
            "arguments[1]",
        ),
        (  # a pinned grant's digest riding along with another value (an audit)
            stub.Check,
            pb.CheckRequest(
                namespace=c.namespace,
                operation=pb.OPERATION_ACT,
                action="send_money",
                arguments=[
                    pb.ActArgument(
                        name="recipient", sources=[prompt], value="eve@evil.example", digest=legit
                    )
                ],
            ),
            "arguments[0].digest",
        ),
        (
            stub.Check,
            pb.CheckRequest(
                namespace=c.namespace,
                operation=pb.OPERATION_READ,
                memory_id=prompt,
                arguments=[pb.ActArgument(name="to")],
            ),
            "arguments",
        ),
        (
            stub.Check,
            pb.CheckRequest(
                namespace=c.namespace,
                operation=pb.OPERATION_ACT,
                arguments=[pb.ActArgument(name="to", sources=[prompt])],
            ),
            "action",
        ),
        (
            stub.Check,
            pb.CheckRequest(
                namespace=c.namespace,
                operation=pb.OPERATION_ACT,
                action="x",
                arguments=[pb.ActArgument(name="to", sources=["bad id"])],
            ),
            "arguments[0].sources[0]",
        ),
        (
            stub.RecordGrant,
            pb.GrantRequest(namespace=c.namespace, grant=pb.Grant(memory_id=prompt)),
            "grant.actions",
        ),
        (
            stub.RecordGrant,
            pb.GrantRequest(namespace=c.namespace, grant=pb.Grant(actions=["send_money"])),
            "grant.source",
        ),
        (  # accepted before, and then covered nothing (arguments compare exactly)
            stub.RecordGrant,
            pb.GrantRequest(
                namespace=c.namespace,
                grant=pb.Grant(actions=["send_money"], memory_id=prompt, arguments=["amount*"]),
            ),
            "grant.arguments[0]",
        ),
        (
            stub.RecordGrant,
            pb.GrantRequest(
                namespace=c.namespace, grant=pb.Grant(actions=["a"], source="user:*", uses=-1)
            ),
            "grant.uses",
        ),
        # control characters and lookalike letters (before: all accepted and stored; the
        # Cyrillic action ALLOWed past the policies' send_* patterns)
        (
            stub.Check,
            pb.CheckRequest(
                namespace=c.namespace,
                operation=pb.OPERATION_ACT,
                action="\u0455end_money",
                arguments=[pb.ActArgument(name="to", sources=[prompt])],
            ),
            "action: contains '\u0455'; an action is ASCII",
        ),
        (
            stub.Check,
            pb.CheckRequest(
                namespace=c.namespace,
                operation=pb.OPERATION_ACT,
                action="send_money",
                arguments=[pb.ActArgument(name="to", sources=[prompt], value="bob\x00\x1b[2J")],
            ),
            "arguments[0].value: contains the control character '\\x00'",
        ),
        (
            stub.RecordGrant,
            pb.GrantRequest(
                namespace=c.namespace, grant=pb.Grant(actions=["a\x00b"], source="user:*")
            ),
            "grant.actions[0]: contains '\\x00'",
        ),
        (
            stub.RecordGrant,
            pb.GrantRequest(
                namespace=c.namespace, grant=pb.Grant(actions=["a"], source="user:* x")
            ),
            "grant.source: contains ' '",  # one string: no [0]
        ),
        (
            stub.RecordGrant,
            pb.GrantRequest(
                namespace=c.namespace,
                grant=pb.Grant(actions=["a"], source="user:*", value="x\x00\n"),
            ),
            "grant.value: contains the control character",
        ),
        (
            stub.Record,
            pb.RecordRequest(
                namespace=c.namespace,
                memory=pb.Memory(
                    id="ctl",
                    creator=pb.Creator(kind=pb.CREATOR_KIND_USER, id="user:alice"),
                    claim=pb.Claim(subject="user:alice", attribute="city", value="a\x00b\x07"),
                ),
            ),
            "memory.claim.value: contains the control character '\\x00'",
        ),
    ]
    for rpc, request, field in cases:
        with pytest.raises(grpc.RpcError) as err:
            rpc(request, timeout=10, metadata=AUTH)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (field, err.value)
        assert err.value.details().startswith(field), (field, err.value.details())
    c.grant(["a"], source="user:*", grant_id="g1")
    with pytest.raises(grpc.RpcError) as err:
        stub.RecordGrant(
            pb.GrantRequest(
                namespace=c.namespace, grant=pb.Grant(id="g1", actions=["a"], source="user:*")
            ),
            timeout=10,
            metadata=AUTH,
        )
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS


@pytest.mark.slow
def test_a_sha256_digest_is_one_digest_in_any_case(sidecar: tuple) -> None:
    """A grant pinned by `SHA256:<HEX>` is stored as `sha256:<hex>`; an act's digest in
    any case is compared with it, and checked against a value sent beside it (an outside
    audit: the pinned digest in upper case rode along with an injected value, ALLOW).
    Two payments at most: the fixture's rate rule allows two an hour."""
    _, c, _ = sidecar
    prompt, bill, _ = _trace(c)
    iban = "DE89370400440532013000"
    good = hashlib.sha256(iban.encode()).hexdigest()
    pinned = c.grant(
        ["send_money"],
        memory_id=bill,
        arguments=["recipient"],
        digest="SHA256:" + good.upper(),
        uses=2,
    )
    assert pinned.digest == "sha256:" + good
    for spelled in ("SHA256:" + good, "Sha256:" + good.upper()):
        evil = ActArg([bill], value="GB00EVIL", digest=spelled)
        with pytest.raises(MemLineageError) as err:
            c.act("send_money", {"recipient": evil, "amount": [prompt]})
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT, spelled
        assert err.value.details.startswith("arguments[0].digest: is not the sha256"), spelled
    both = ActArg([bill], value=iban, digest="Sha256:" + good.upper())
    paid = c.act("send_money", {"recipient": both, "amount": [prompt]})
    assert paid.effect == pb.EFFECT_ALLOW and list(paid.grants_used) == [pinned.id]
    only = ActArg([bill], digest="sha256:" + good)
    paid = c.act("send_money", {"recipient": only, "amount": [prompt]})
    assert paid.effect == pb.EFFECT_ALLOW and list(paid.grants_used) == [pinned.id]


@pytest.mark.any_runtime
def test_a_namespace_full_of_live_grants_answers_resource_exhausted(sidecar: tuple) -> None:
    """The served store with its real cap: filled with live grants (written through the
    store itself, the quick way), a RecordGrant is RESOURCE_EXHAUSTED saying so, and
    nothing is dropped; once they expired, the next one makes room and is recorded."""
    s, c, clock = sidecar
    store = s.sidecar.store
    for i in range(MAX_GRANTS_PER_NAMESPACE):
        store.put_grant(
            GrantRecord(f"g{i}", c.namespace, "user:alice", ("send_money",), source="tool:*"),
            now=clock(),
        )
    with pytest.raises(MemLineageError) as err:
        c.grant(["send_money"], source="tool:read_file", grant_id="one-more")
    assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED, err.value
    details = err.value.details
    assert f"namespace {c.namespace!r} holds {MAX_GRANTS_PER_NAMESPACE} grants" in details
    assert "let grants expire or spend their uses" in details, details
    assert len(store.grants(c.namespace)) == MAX_GRANTS_PER_NAMESPACE

    clock.advance(3601)  # every grant expired: inert, the oldest makes room
    assert c.grant(["send_money"], source="tool:read_file", grant_id="one-more").id == "one-more"
    held = {g.id for g in store.grants(c.namespace)}
    assert len(held) == MAX_GRANTS_PER_NAMESPACE and "g0" not in held and "one-more" in held


def test_grants_and_their_uses_survive_a_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    config = Config(policy_dir=BUNDLED_POLICIES, data_dir=data, decision_log="off")
    with RunningSidecar(config) as s, MemLineageClient(s.address, timeout=10) as c:
        prompt, bill, _ = _trace(c)
        g = c.grant(["send_money"], memory_id=bill, arguments=["amount"], uses=2)
        assert c.act("send_money", {"recipient": [prompt], "amount": [bill]}).grants_used
    with RunningSidecar(config) as s, MemLineageClient(s.address, timeout=10) as c:
        shown = next(x for x in c.explain(bill).grants if x.id == g.id)
        assert shown.used == 1 and shown.effective
        assert c.act("send_money", {"recipient": [prompt], "amount": [bill]}).grants_used
        assert c.act("send_money", {"recipient": [prompt], "amount": [bill]}).effect == (
            pb.EFFECT_DENY
        )


def test_a_grant_bound_to_a_value_covers_only_that_value(sidecar: tuple) -> None:
    _, c, _ = sidecar
    prompt, _, _ = _trace(c)
    c.record("files", creator="tool:list_files")  # ids "11" and "13" in one output
    g = c.grant(["delete_file"], memory_id="files", arguments=["file_id"], value="11", uses=2)
    assert g.value == "11"
    injected = c.act("delete_file", {"file_id": ActArg(["files"], value="13")})
    assert injected.effect == pb.EFFECT_DENY and not injected.grants_used
    mine = c.act("delete_file", {"file_id": ActArg(["files"], value="11")}, relies_on=[prompt])
    assert mine.effect == pb.EFFECT_ALLOW and list(mine.grants_used) == [g.id]

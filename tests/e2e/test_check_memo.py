"""Check requests recognised by their bytes (the servicer's memo of reusable
decisions) through a real sidecar: every answer is still a decision of its own and
equal to a fresh one, callers never share an answer across namespaces, malformed
bytes are refused precisely, and nothing is remembered where it may not hold."""

from __future__ import annotations

import grpc
import pytest
from memlineage.client import MemLineageClient, PermissionDenied
from memlineage.grpc_api.check_memo import CheckMemo
from memlineage.grpc_api.servicer import MemLineageService
from memlineage.v1 import memlineage_pb2 as pb
from support.sidecar import World

CHECK = "/memlineage.v1.MemLineage/Check"


def _service(world: World) -> MemLineageService:
    assert world.sidecar.sidecar is not None
    return world.sidecar.sidecar.service


def _raw_check(world: World, token: str, data: bytes) -> pb.CheckResponse:
    """Check with the request bytes exactly as given."""
    with grpc.insecure_channel(world.sidecar.address) as channel:
        call = channel.unary_unary(
            CHECK, request_serializer=None, response_deserializer=pb.CheckResponse.FromString
        )
        return call(data, metadata=(("authorization", f"Bearer {token}"),), timeout=10)


def test_repeated_checks_are_decisions_of_their_own(world: World) -> None:
    c = world.alice
    c.record("seat", creator="user:alice", type="preference", claim=("alice", "seat", "aisle"))
    answers = [c.check("read", "seat") for _ in range(5)]
    assert {a.effect for a in answers} == {pb.EFFECT_ALLOW}
    ids = [a.decision_id for a in answers]
    assert len(set(ids)) == 5
    assert [a.decided_at.seconds for a in answers] == [int(world.now)] * 5
    explained = {d.decision_id for d in c.explain("seat", decisions=10).decisions}
    assert set(ids) <= explained  # each one journaled (Explain, Feedback by id)
    assert len(_service(world).check_memo) == 1  # embedded and Redis alike


def test_a_remembered_request_sees_writes_and_time(world: World) -> None:
    c = world.alice
    c.record("fare", creator="tool:flight_api", tags=["flight_price"], type="tool_result")
    for _ in range(3):
        assert c.check("read", "fare").effect == pb.EFFECT_ALLOW
    world.clock.advance(3601.0)  # the price is now stale: past the decision's horizon
    stale = c.check("read", "fare")
    assert stale.effect == pb.EFFECT_DEGRADE
    assert [o.kind for o in stale.obligations] == ["refresh"]
    c.record("note", creator="user:alice")
    assert c.check("read", "note").effect == pb.EFFECT_ALLOW
    c.revoke("note", reason="wrong")  # a write: the remembered answer no longer holds
    assert c.check("read", "note").effect == pb.EFFECT_DENY


def test_the_same_bytes_from_two_callers_are_decided_in_each_namespace(world: World) -> None:
    world.alice.record("city", creator="user:alice", type="fact")
    data = pb.CheckRequest(operation=pb.OPERATION_READ, memory_id="city").SerializeToString()
    for _ in range(3):
        mine = _raw_check(world, "token-alice", data).decision
        assert mine.effect == pb.EFFECT_ALLOW
        theirs = _raw_check(world, "token-bob", data).decision
        # alice's memory, asked from user-b: unknown there, never alice's answer
        assert theirs.effect == pb.EFFECT_DEGRADE
        assert [r.policy for r in theirs.reasons] == ["unknown_provenance_read"]
    naming_a = pb.CheckRequest(
        namespace="user-a", operation=pb.OPERATION_READ, memory_id="city"
    ).SerializeToString()
    assert _raw_check(world, "token-alice", naming_a).decision.effect == pb.EFFECT_ALLOW
    for _ in range(2):  # alice's remembered bytes are no pass for bob
        with pytest.raises(grpc.RpcError) as info:
            _raw_check(world, "token-bob", naming_a)
        assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with (
        MemLineageClient(
            world.sidecar.address, token="token-bob", namespace="user-a", timeout=10
        ) as bob_in_a,
        pytest.raises(PermissionDenied),
    ):
        bob_in_a.check("read", "city")


@pytest.mark.parametrize("data", [b"\xff\xff\xff", b"\x0a\x05ab", b"\x12"])
def test_malformed_check_bytes_are_invalid_argument(world: World, data: bytes) -> None:
    with pytest.raises(grpc.RpcError) as info:
        _raw_check(world, "token-alice", data)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details().startswith(
        "request: is not a valid memlineage.v1.CheckRequest message"
    ), info.value.details()
    assert len(_service(world).check_memo) == 0


def test_a_request_with_its_own_time_is_not_remembered(world: World) -> None:
    c = world.alice
    c.record("pref", creator="user:alice", type="preference")
    for _ in range(3):
        assert c.check("read", "pref", at=world.now - 10).effect == pb.EFFECT_ALLOW
    assert len(_service(world).check_memo) == 0


def test_a_request_padded_with_unknown_fields_is_decided_not_remembered(world: World) -> None:
    """Unknown fields (ignored by the parse) padded each remembered entry to 4 KiB:
    one tenant's 95,000 Checks took 455 MB of the sidecar (an outside audit). A request
    whose bytes the message does not account for is decided, not remembered; the same
    request without the padding is remembered once."""
    c = world.alice
    c.record("pref", creator="user:alice", type="preference")
    plain = pb.CheckRequest(operation=pb.OPERATION_READ, memory_id="pref").SerializeToString()
    for n in range(20):  # field 99, length-delimited: a distinct padding each time
        pad = b"\x9a\x06" + bytes([100]) + n.to_bytes(1, "big") * 100
        answer = _raw_check(world, "token-alice", plain + pad)
        assert answer.decision.effect == pb.EFFECT_ALLOW
    assert len(_service(world).check_memo) == 0
    for _ in range(3):
        assert _raw_check(world, "token-alice", plain).decision.effect == pb.EFFECT_ALLOW
    assert len(_service(world).check_memo) == 1


def test_a_caller_filling_the_memo_evicts_only_its_own(world: World) -> None:
    """The memo was cleared whole when full, by whichever caller filled it: one tenant's
    distinct requests emptied every other tenant's entries (an outside audit)."""
    service = _service(world)
    service.check_memo = memo = CheckMemo(limit=8)
    world.alice.record("pref", creator="user:alice", type="preference")
    world.bob.record("seat", creator="user:bob", type="preference")
    bobs = pb.CheckRequest(operation=pb.OPERATION_READ, memory_id="seat").SerializeToString()
    assert _raw_check(world, "token-bob", bobs).decision.effect == pb.EFFECT_ALLOW
    assert len(memo) == 1
    bob_scope = service.auth.principal({"authorization": "Bearer token-bob"}).scope
    assert memo.get((bob_scope, bobs)) is not None
    for i in range(30):  # distinct requests, each remembered
        data = pb.CheckRequest(
            operation=pb.OPERATION_READ, memory_id="pref", action=f"tool-{i}"
        ).SerializeToString()
        assert _raw_check(world, "token-alice", data).decision.effect == pb.EFFECT_ALLOW
    assert memo.get((bob_scope, bobs)) is not None  # bob's request is still remembered
    assert 1 <= len(memo) - 1 <= 7
    assert memo.held(bob_scope) == 1

"""MemLineageClient (and AsyncMemLineageClient's retries) without the sidecar:
conversions, the retry service config, and calls against a real in-test gRPC
server whose handlers each test scripts (so the attempts gRPC makes are counted
where they arrive)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from memlineage.client import (
    Aborted,
    AlreadyExists,
    AsyncMemLineageClient,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    MemLineageClient,
    MemLineageError,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
    Unimplemented,
    backoff_delay,
    from_timestamp,
    parse_actor,
    parse_creator,
    to_timestamp,
)
from memlineage.client.retry import MAX_RETRIES, RETRIED_METHODS, channel_options, service_config
from memlineage.v1 import memlineage_pb2 as pb
from memlineage.v1 import memlineage_pb2_grpc as pb_grpc
from support.redis_servers import free_port

UNAVAILABLE = grpc.StatusCode.UNAVAILABLE

# ---------------------------------------------------------------- pure functions


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("user:alice", pb.CREATOR_KIND_USER),
        ("tool:flight_api", pb.CREATOR_KIND_TOOL),
        ("reasoning:step3", pb.CREATOR_KIND_REASONING),
        ("agent:architect", pb.CREATOR_KIND_AGENT),
        ("system:sweeper", pb.CREATOR_KIND_SYSTEM),
        ("system", pb.CREATOR_KIND_SYSTEM),
    ],
)
def test_parse_actor_keeps_the_full_text_as_id(text: str, kind: int) -> None:
    assert parse_actor(text) == pb.Actor(kind=kind, id=text)
    assert parse_creator(text) == pb.Creator(kind=kind, id=text)


@pytest.mark.parametrize("text", ["robot:r2", "", ":x", "User:bob", " user:bob"])
def test_parse_actor_rejects_unknown_kinds(text: str) -> None:
    with pytest.raises(ValueError, match="kind"):
        parse_actor(text)


@pytest.mark.parametrize("t", [0.0, 1.5, 1_700_000_000.123456, 1_700_000_000.000001, -1.25])
def test_timestamp_round_trip_keeps_sub_seconds(t: float) -> None:
    ts = to_timestamp(t)
    assert 0 <= ts.nanos < 1_000_000_000
    assert from_timestamp(ts) == pytest.approx(t, abs=1e-6)


def test_timestamp_edges() -> None:
    assert to_timestamp(-1.25) == pb.RecordRequest().time.__class__(seconds=-2, nanos=750_000_000)
    carry = to_timestamp(0.9999999999)
    assert (carry.seconds, carry.nanos) == (1, 0)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite"):
            to_timestamp(bad)


def test_the_service_config_retries_read_only_methods_on_unavailable_only() -> None:
    [method] = service_config(3)["methodConfig"]
    named = {(n["service"], n["method"]) for n in method["name"]}
    assert named == set(RETRIED_METHODS)
    assert named == {
        ("memlineage.v1.MemLineage", "Check"),
        ("memlineage.v1.MemLineage", "FilterRank"),
        ("memlineage.v1.MemLineage", "Explain"),
        ("memlineage.v1.PolicyAdmin", "ListPolicies"),
        ("memlineage.v1.PolicyAdmin", "LintPolicy"),
        ("grpc.health.v1.Health", "Check"),
    }
    assert method["retryPolicy"] == {
        "maxAttempts": 4,
        "initialBackoff": "0.05s",
        "maxBackoff": "1.0s",
        "backoffMultiplier": 2.0,
        "retryableStatusCodes": ["UNAVAILABLE"],
    }
    # gRPC treats more than 5 attempts as 5; the config says what gRPC will do
    assert service_config(99)["methodConfig"][0]["retryPolicy"]["maxAttempts"] == MAX_RETRIES + 1
    assert service_config(0) == {}


def test_channel_options_carry_the_config_and_the_callers_options_win() -> None:
    options = dict(channel_options(2))
    assert options["grpc.enable_retries"] == 1
    assert options["grpc.service_config_disable_resolution"] == 1
    assert json.loads(options["grpc.service_config"]) == service_config(2)
    mine = dict(
        channel_options(2, [("grpc.enable_retries", 0), ("grpc.max_send_message_length", 9)])
    )
    assert mine["grpc.enable_retries"] == 0 and mine["grpc.max_send_message_length"] == 9


def test_backoff_schedule_grows_is_capped_and_jittered() -> None:
    full = [backoff_delay(a, rng=lambda: 1.0) for a in range(8)]
    assert full[:4] == pytest.approx([0.05, 0.1, 0.2, 0.4])
    assert max(full) == 1.0 and full[-1] == 1.0
    assert [backoff_delay(a, rng=lambda: 0.0) for a in range(3)] == pytest.approx(
        [0.025, 0.05, 0.1]
    )
    assert backoff_delay(2, base=0.1, cap=0.3, rng=lambda: 1.0) == pytest.approx(0.3)


# ---------------------------------------------------------------- a real test server

Handler = Callable[[Any, grpc.ServicerContext], Any]


class Scripted(pb_grpc.MemLineageServicer, pb_grpc.PolicyAdminServicer):
    """Answers each RPC with the handler a test set, and remembers what it got."""

    def __init__(self) -> None:
        self.handlers: dict[str, Handler] = {}
        self.calls: list[tuple[str, Any, dict[str, str], float | None]] = []
        self.target = ""
        self.health = health.HealthServicer()

    def requests(self, name: str) -> list[Any]:
        return [request for n, request, _, _ in self.calls if n == name]

    def _handle(self, name: str, request: Any, context: grpc.ServicerContext) -> Any:
        self.calls.append(
            (name, request, dict(context.invocation_metadata()), context.time_remaining())
        )
        handler = self.handlers.get(name)
        if handler is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{name} not scripted")
        return handler(request, context)

    def Record(self, request, context):
        return self._handle("Record", request, context)

    def Check(self, request, context):
        return self._handle("Check", request, context)

    def FilterRank(self, request, context):
        return self._handle("FilterRank", request, context)

    def UpdateStatus(self, request, context):
        return self._handle("UpdateStatus", request, context)

    def Feedback(self, request, context):
        return self._handle("Feedback", request, context)

    def Explain(self, request, context):
        return self._handle("Explain", request, context)

    def RecordGrant(self, request, context):
        return self._handle("RecordGrant", request, context)

    def Revise(self, request, context):
        return self._handle("Revise", request, context)

    def RunSweep(self, request, context):
        return self._handle("RunSweep", request, context)

    def Watch(self, request, context):
        yield from self._handle("Watch", request, context)

    def ListPolicies(self, request, context):
        return self._handle("ListPolicies", request, context)

    def ReloadPolicies(self, request, context):
        return self._handle("ReloadPolicies", request, context)

    def LintPolicy(self, request, context):
        return self._handle("LintPolicy", request, context)


def serve(svc: Scripted, address: str = "127.0.0.1:0") -> grpc.Server:
    """Start a real gRPC server for ``svc`` on ``address``; ``svc.target`` is where."""
    srv = grpc.server(ThreadPoolExecutor(max_workers=8))
    pb_grpc.add_MemLineageServicer_to_server(svc, srv)
    pb_grpc.add_PolicyAdminServicer_to_server(svc, srv)
    health_pb2_grpc.add_HealthServicer_to_server(svc.health, srv)
    port = srv.add_insecure_port(address)
    srv.start()
    svc.target = f"127.0.0.1:{port}"
    return srv


@pytest.fixture
def server() -> Iterator[Scripted]:
    svc = Scripted()
    srv = serve(svc)
    yield svc
    srv.stop(0)


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(server: Scripted, sleeps: list[float]) -> Iterator[MemLineageClient]:
    with MemLineageClient(
        server.target,
        token="s3cret",
        namespace="tenant-a",
        timeout=2.0,
        sleep=sleeps.append,
        rng=lambda: 1.0,
    ) as c:
        yield c


def allow(request: Any, context: grpc.ServicerContext) -> pb.CheckResponse:
    return pb.CheckResponse(
        decision=pb.Decision(decision_id="d1", effect=pb.EFFECT_ALLOW, compliance_score=1.0)
    )


def fail_then(times: int, code: grpc.StatusCode, details: str, then: Handler) -> Handler:
    left = [times]

    def handler(request: Any, context: grpc.ServicerContext) -> Any:
        if left[0] > 0:
            left[0] -= 1
            context.abort(code, details)
        return then(request, context)

    return handler


# ---------------------------------------------------------------- calls


def test_check_sends_token_namespace_deadline_and_operation(
    server: Scripted, client: MemLineageClient
) -> None:
    server.handlers["Check"] = allow
    decision = client.check("read", "m1", actor="agent:planner", budget=0.5, at=1_700_000_000.25)
    assert decision.effect == pb.EFFECT_ALLOW
    [(_, request, metadata, remaining)] = server.calls
    assert metadata["authorization"] == "Bearer s3cret"
    assert remaining is not None and 0 < remaining <= 2.05  # deadline rounding on the wire
    assert request.namespace == "tenant-a"
    assert request.operation == pb.OPERATION_READ and request.memory_id == "m1"
    assert request.actor == pb.Actor(kind=pb.CREATOR_KIND_AGENT, id="agent:planner")
    assert request.HasField("budget") and request.budget == 0.5
    assert from_timestamp(request.time) == pytest.approx(1_700_000_000.25)


def test_check_act_sends_every_id_and_no_budget_when_unset(
    server: Scripted, client: MemLineageClient
) -> None:
    server.handlers["Check"] = allow
    client.check("act", ["a", "b"], action="send_email")
    [request] = server.requests("Check")
    assert list(request.memory_ids) == ["a", "b"] and request.memory_id == ""
    assert request.action == "send_email"
    assert not request.HasField("budget") and not request.HasField("actor")
    assert not request.HasField("time")


def test_bad_arguments_fail_before_any_call(server: Scripted, client: MemLineageClient) -> None:
    with pytest.raises(ValueError, match="actor"):
        client.check("read", "m", actor="robot:r2")
    with pytest.raises(ValueError, match="operation"):
        client.check("peek", "m")
    with pytest.raises(ValueError, match="one id"):
        client.check("read", ["a", "b"])
    with pytest.raises(ValueError, match="creator"):
        client.record("m", creator="alien:x")
    for claim in (("user:a", "city"), "user:a city x"):  # before: "not enough values to unpack"
        with pytest.raises(ValueError, match=r"claim: is \(subject, attribute, value\)"):
            client.record("m", creator="user:a", claim=claim)  # type: ignore[arg-type]
    assert server.calls == []


def test_a_misspelt_or_missing_keyword_is_a_type_error_before_any_call(
    server: Scripted, client: MemLineageClient
) -> None:
    """The calls with many keywords read them from a TypedDict (`messages`): a name
    that is not one of them fails as it would against a spelt-out signature, instead
    of being dropped (a misspelt ``confidence`` must not record 1.0)."""
    calls: list[tuple[Any, str]] = [
        (lambda: client.record("m", creator="user:a", confidance=0.2), "'confidance'"),
        (lambda: client.record("m"), "missing required keyword argument 'creator'"),
        (lambda: client.revise("m", expected_version=1, creator="user:a", tag=()), "'tag'"),
        (lambda: client.check("read", "m", histórical=True), "'histórical'"),
        (lambda: client.filter_rank([("m", 0.5)], limt=3), "'limt'"),
        (lambda: client.grant(["pay"], sorce="tool:x"), "'sorce'"),
    ]
    for call, named in calls:
        with pytest.raises(TypeError, match=named):
            call()
    assert server.calls == []


def test_left_out_keywords_take_their_documented_defaults(
    server: Scripted, client: MemLineageClient
) -> None:
    server.handlers["Record"] = lambda r, c: pb.RecordResponse(recorded=True, memory=r.memory)
    client.record("m", creator="user:alice")
    [request] = server.requests("Record")
    m = request.memory
    assert (m.type, m.creator_confidence, list(m.tags), m.volatility) == ("fact", 1.0, [], "")
    assert not m.HasField("claim") and not m.HasField("created_at")
    assert not request.HasField("actor") and not request.HasField("time")


def test_no_token_sends_no_authorization(server: Scripted) -> None:
    server.handlers["Check"] = allow
    with MemLineageClient(server.target) as anonymous:
        anonymous.check("read", "m")
    [(_, request, metadata, _)] = server.calls
    assert "authorization" not in metadata and request.namespace == ""


def test_record_builds_the_memory(server: Scripted, client: MemLineageClient) -> None:
    server.handlers["Record"] = lambda r, c: pb.RecordResponse(recorded=True, memory=r.memory)
    response = client.record(
        "price-1",
        creator="tool:flight_api",
        confidence=0.8,
        type="tool_result",
        tags=("flight_price",),
        claim=("user:42", "destination_city", "Shanghai"),
        volatility="high",
        context_id="conv-9",
        dependencies=["query-1"],
        created_at=1_700_000_000.5,
    )
    assert response.recorded
    [request] = server.requests("Record")
    m = request.memory
    assert (m.id, m.type, list(m.tags), m.volatility, m.context_id) == (
        "price-1",
        "tool_result",
        ["flight_price"],
        "high",
        "conv-9",
    )
    assert m.creator == pb.Creator(kind=pb.CREATOR_KIND_TOOL, id="tool:flight_api")
    assert m.creator_confidence == 0.8 and list(m.dependencies) == ["query-1"]
    assert m.claim == pb.Claim(subject="user:42", attribute="destination_city", value="Shanghai")
    assert (m.created_at.seconds, m.created_at.nanos) == (1_700_000_000, 500_000_000)
    assert not request.HasField("actor")


def test_revise_builds_the_new_version_as_record_does(
    server: Scripted, client: MemLineageClient
) -> None:
    server.handlers["Revise"] = lambda r, c: pb.ReviseResponse(applied=True, memory=r.memory)
    response = client.revise(
        "price-1",
        expected_version=3,
        creator="tool:flight_api",
        confidence=0.5,
        tags=("fresh",),
        claim=("user:42", "destination_city", "Beijing"),
        dependencies=["query-2"],
        actor="user:42",
        budget=0.5,
        at=1_700_000_001.0,
    )
    assert response.applied
    [request] = server.requests("Revise")
    assert request.expected_version == 3
    m = request.memory
    assert (m.id, list(m.tags), list(m.dependencies), m.creator_confidence) == (
        "price-1",
        ["fresh"],
        ["query-2"],
        0.5,
    )
    assert m.claim.value == "Beijing" and m.creator.id == "tool:flight_api"
    assert request.actor == pb.Actor(kind=pb.CREATOR_KIND_USER, id="user:42")
    assert request.budget == 0.5 and request.time.seconds == 1_700_000_001


def test_status_updates_feedback_and_admin_requests(
    server: Scripted, client: MemLineageClient
) -> None:
    server.handlers["UpdateStatus"] = lambda r, c: pb.UpdateStatusResponse(applied=True)
    server.handlers["Feedback"] = lambda r, c: pb.FeedbackResponse(updated=len(r.memory_ids))
    server.handlers["ReloadPolicies"] = lambda r, c: pb.ReloadPoliciesResponse(applied=True)
    server.handlers["LintPolicy"] = lambda r, c: pb.LintPolicyResponse(ok=True)
    server.handlers["ListPolicies"] = lambda r, c: pb.ListPoliciesResponse(version="v7")
    server.handlers["Explain"] = lambda r, c: pb.ExplainResponse(memory=pb.Memory(id=r.memory_id))
    server.handlers["FilterRank"] = lambda r, c: pb.FilterRankResponse(ranked_ids=["b"])

    client.revoke("a", reason="wrong", expected_version=3)
    client.supersede("a", "b", actor="user:alice")
    client.confirm("c")
    assert client.feedback("d1", ["a", "b"], success=False, note="bad").updated == 2
    assert client.reload_policies({"p.mlp": "x"}).applied
    assert client.reload_policies().applied
    assert client.lint_policy({"p.mlp": "x"}).ok
    assert client.list_policies().version == "v7"
    assert client.explain("a", ancestor_depth=2).memory.id == "a"
    assert client.filter_rank([("a", 0.9), ("b", 0.5)], limit=1).ranked_ids == ["b"]

    revoke, supersede, confirm = server.requests("UpdateStatus")
    assert (revoke.action, revoke.reason, revoke.expected_version) == (
        pb.STATUS_ACTION_REVOKE,
        "wrong",
        3,
    )
    assert (supersede.action, supersede.successor_id) == (pb.STATUS_ACTION_SUPERSEDE, "b")
    assert supersede.actor.kind == pb.CREATOR_KIND_USER
    assert confirm.action == pb.STATUS_ACTION_CONFIRM
    [feedback] = server.requests("Feedback")
    assert (feedback.decision_id, feedback.success, feedback.note) == ("d1", False, "bad")
    first, second = server.requests("ReloadPolicies")
    assert dict(first.files) == {"p.mlp": "x"} and dict(second.files) == {}
    [explain] = server.requests("Explain")
    assert (explain.namespace, explain.ancestor_depth, explain.descendant_depth) == (
        "tenant-a",
        2,
        0,
    )
    [fr] = server.requests("FilterRank")
    assert [(c.memory_id, c.similarity) for c in fr.candidates] == [("a", 0.9), ("b", 0.5)]
    assert fr.limit == 1


# ---------------------------------------------------------------- errors and retries


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidArgument),
        (grpc.StatusCode.NOT_FOUND, NotFound),
        (grpc.StatusCode.PERMISSION_DENIED, PermissionDenied),
        (grpc.StatusCode.FAILED_PRECONDITION, FailedPrecondition),
        (grpc.StatusCode.OUT_OF_RANGE, OutOfRange),
        (grpc.StatusCode.ALREADY_EXISTS, AlreadyExists),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, ResourceExhausted),
        (grpc.StatusCode.ABORTED, Aborted),
        (grpc.StatusCode.DATA_LOSS, DataLoss),
        (grpc.StatusCode.INTERNAL, Internal),  # before: the base class for these three
        (grpc.StatusCode.UNIMPLEMENTED, Unimplemented),
        (grpc.StatusCode.CANCELLED, Cancelled),
        (grpc.StatusCode.UNKNOWN, MemLineageError),  # never sent by a sidecar
    ],
)
def test_status_codes_become_typed_errors(
    server: Scripted,
    client: MemLineageClient,
    code: grpc.StatusCode,
    error: type[MemLineageError],
) -> None:
    server.handlers["Explain"] = fail_then(99, code, "memory_id: bad", allow)
    with pytest.raises(error) as caught:
        client.explain("x")
    assert type(caught.value) is error
    assert caught.value.code == code and caught.value.details == "memory_id: bad"
    assert len(server.calls) == 1  # never retried


def test_check_is_retried_on_unavailable_by_grpc(
    server: Scripted, client: MemLineageClient, sleeps: list[float]
) -> None:
    server.handlers["Check"] = fail_then(2, UNAVAILABLE, "store down", allow)
    assert client.check("read", "m").effect == pb.EFFECT_ALLOW
    assert len(server.requests("Check")) == 3
    assert sleeps == []  # gRPC's retry policy paces the attempts, not the client


def test_retries_are_bounded(server: Scripted, sleeps: list[float]) -> None:
    server.handlers["Check"] = fail_then(99, UNAVAILABLE, "store down", allow)
    c = MemLineageClient(server.target, retries=1, sleep=sleeps.append)
    with c, pytest.raises(Unavailable, match="store down"):
        c.check("read", "m")
    assert len(server.requests("Check")) == 2
    server.calls.clear()
    with MemLineageClient(server.target, retries=0) as once, pytest.raises(Unavailable):
        once.check("read", "m")
    assert len(server.requests("Check")) == 1


_RESPONSES: dict[str, Any] = {
    "Check": pb.CheckResponse,
    "FilterRank": pb.FilterRankResponse,
    "Explain": pb.ExplainResponse,
    "ListPolicies": pb.ListPoliciesResponse,
    "LintPolicy": pb.LintPolicyResponse,
    "Record": pb.RecordResponse,
    "RecordGrant": pb.GrantResponse,
    "Revise": pb.ReviseResponse,
    "Feedback": pb.FeedbackResponse,
    "UpdateStatus": pb.UpdateStatusResponse,
    "ReloadPolicies": pb.ReloadPoliciesResponse,
    "RunSweep": pb.RunSweepResponse,
}

# (client method, the RPC it makes, a call, whether gRPC may re-send it)
RETRY_TABLE: list[tuple[str, str, Callable[[Any], Any], bool]] = [
    ("check", "Check", lambda c: c.check("read", "m"), True),
    ("check write", "Check", lambda c: c.check("write", "m"), True),
    ("filter_rank", "FilterRank", lambda c: c.filter_rank([("m", 1.0)]), True),
    ("explain", "Explain", lambda c: c.explain("m"), True),
    ("list_policies", "ListPolicies", lambda c: c.list_policies(), True),
    ("lint_policy", "LintPolicy", lambda c: c.lint_policy({"p.mlp": ""}), True),
    ("record", "Record", lambda c: c.record("m", creator="user:u"), False),
    ("revise", "Revise", lambda c: c.revise("m", expected_version=1, creator="user:u"), False),
    ("act", "Check", lambda c: c.act("send_money", {"to": ["m"]}), False),
    ("check act", "Check", lambda c: c.check("act", ["m"], action="send_money"), False),
    ("grant", "RecordGrant", lambda c: c.grant(["send_money"], source="user:u"), False),
    ("feedback", "Feedback", lambda c: c.feedback("d1", ["m"], True), False),
    ("revoke", "UpdateStatus", lambda c: c.revoke("m"), False),
    ("supersede", "UpdateStatus", lambda c: c.supersede("m", "n"), False),
    ("confirm", "UpdateStatus", lambda c: c.confirm("m"), False),
    ("compress", "UpdateStatus", lambda c: c.compress("m", "s"), False),
    ("reload_policies", "ReloadPolicies", lambda c: c.reload_policies(), False),
    ("run_sweep", "RunSweep", lambda c: c.run_sweep(), False),
]


def with_client(kind: str, target: str, call: Callable[[Any], Any], **kwargs: Any) -> Any:
    """``call(client)`` on a fresh sync or async client (the async one in its own loop)."""
    if kind == "sync":
        with MemLineageClient(target, **kwargs) as c:
            return call(c)

    async def run() -> Any:
        async with AsyncMemLineageClient(target, **kwargs) as c:
            return await call(c)

    return asyncio.run(run())


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize(
    ("name", "rpc", "call", "retried"), RETRY_TABLE, ids=[row[0] for row in RETRY_TABLE]
)
def test_which_calls_grpc_resends_after_unavailable(
    server: Scripted,
    kind: str,
    name: str,
    rpc: str,
    call: Callable[[Any], Any],
    retried: bool,
) -> None:
    """The server answers the first attempt UNAVAILABLE: a read-only call is re-sent by
    gRPC and succeeds; a call that changes state (an act spends a grant) reached the
    server, so it is never sent again and the error surfaces."""
    server.handlers[rpc] = fail_then(1, UNAVAILABLE, "store down", lambda r, c: _RESPONSES[rpc]())
    if retried:
        with_client(kind, server.target, call, timeout=5)
        assert len(server.requests(rpc)) == 2
    else:
        with pytest.raises(Unavailable, match="store down"):
            with_client(kind, server.target, call, timeout=5)
        assert len(server.requests(rpc)) == 1


def test_record_reaching_the_server_is_not_retried(
    server: Scripted, client: MemLineageClient, sleeps: list[float]
) -> None:
    server.handlers["Record"] = fail_then(
        1, UNAVAILABLE, "store down", lambda r, c: pb.RecordResponse(recorded=True)
    )
    with pytest.raises(Unavailable):
        client.record("m", creator="user:u")
    assert len(server.requests("Record")) == 1 and sleeps == []


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_call_waits_for_a_server_that_starts_within_its_deadline(kind: str) -> None:
    """No server listens yet: the Record waits for the channel (``wait_for_ready``)
    and is sent once, when a server comes up on that port 0.3 s later."""
    address = f"127.0.0.1:{free_port()}"
    svc = Scripted()
    svc.handlers["Record"] = lambda r, c: pb.RecordResponse(recorded=True)
    started: list[grpc.Server] = []
    timer = threading.Timer(0.3, lambda: started.append(serve(svc, address)))
    timer.start()
    try:
        begun = time.monotonic()
        response = with_client(
            kind,
            address,
            lambda c: c.record("m", creator="user:u"),
            timeout=10,
            options=[("grpc.initial_reconnect_backoff_ms", 100)],
        )
        assert response.recorded and time.monotonic() - begun < 10
        assert len(svc.requests("Record")) == 1
    finally:
        timer.join()
        for srv in started:
            srv.stop(0)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_without_retries_a_call_fails_at_once_when_no_server_listens(kind: str) -> None:
    began = time.monotonic()
    with pytest.raises(Unavailable, match=r"(?i)connect"):
        with_client(
            kind,
            f"127.0.0.1:{free_port()}",
            lambda c: c.record("m", creator="user:u"),
            timeout=5,
            retries=0,
        )
    assert time.monotonic() - began < 2.5


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_timeout_bounds_a_call_with_all_its_retries(server: Scripted, kind: str) -> None:
    def slow_failure(request: Any, context: grpc.ServicerContext) -> Any:
        time.sleep(0.25)
        context.abort(UNAVAILABLE, "store down")

    server.handlers["Explain"] = slow_failure
    began = time.monotonic()
    with pytest.raises((DeadlineExceeded, Unavailable)):
        with_client(kind, server.target, lambda c: c.explain("m"), timeout=0.6, retries=4)
    assert time.monotonic() - began < 1.5
    assert 1 <= len(server.requests("Explain")) <= 3  # not the 5 attempts 4 retries allow


def test_deadline_exceeded_surfaces_and_is_not_retried(
    server: Scripted, sleeps: list[float]
) -> None:
    def slow(request: Any, context: grpc.ServicerContext) -> pb.ExplainResponse:
        while context.is_active():
            time.sleep(0.01)
        return pb.ExplainResponse()

    server.handlers["Explain"] = slow
    started = time.monotonic()
    c = MemLineageClient(server.target, timeout=0.2, sleep=sleeps.append)
    with c, pytest.raises(DeadlineExceeded) as caught:
        c.explain("m")
    assert caught.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "never reachable" not in caught.value.details  # it was there: slow
    assert time.monotonic() - started < 1.5
    assert len(server.calls) == 1 and sleeps == []


def test_a_sidecar_never_reached_is_named_in_the_deadline() -> None:
    """A call that waited for a sidecar that is not there says so (before: a bare
    "Deadline Exceeded", which an operator cannot tell from a slow policy); a slow
    answer from a sidecar that is there keeps the plain message (the test above)."""
    target = f"127.0.0.1:{free_port()}"  # a port nothing listens on
    started = time.monotonic()
    with MemLineageClient(target, timeout=0.5) as c, pytest.raises(DeadlineExceeded) as caught:
        c.explain("m")
    assert time.monotonic() - started < 2.0
    assert f"the sidecar at {target} was never reachable" in caught.value.details


UNREACHABLE_SCRIPT = """
import sys, threading, time
from memlineage.client import DeadlineExceeded, MemLineageClient
client = MemLineageClient(sys.argv[1], timeout=0.3)
try:
    client.explain("m")
except DeadlineExceeded as exc:
    print("never reachable" in exc.details)
time.sleep(1.0)  # past the 0.2 s a grpc connectivity poll waits at a time
print(sorted(t.name for t in threading.enumerate() if t is not threading.main_thread()))
"""


def test_a_sidecar_never_reached_leaves_no_thread_and_no_traceback_at_exit() -> None:
    """Asking whether the channel ever connected left its ready-future waiting, never
    cancelled: a grpc thread kept polling the channel for the rest of the process and,
    meeting the interpreter's exit, printed `Exception in thread Thread-1 (_run):
    Traceback ...` after the clear DeadlineExceeded."""
    target = f"127.0.0.1:{free_port()}"  # a port nothing listens on
    out = subprocess.run(
        [sys.executable, "-c", UNREACHABLE_SCRIPT, target],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["True", "[]"], out.stdout  # no poll thread left
    assert "Traceback" not in out.stderr and "Exception in thread" not in out.stderr, out.stderr


def test_counts_past_the_requests_int32_are_named_before_anything_is_sent() -> None:
    """Before: protobuf's "Value out of range: N", naming no argument."""
    c = MemLineageClient("127.0.0.1:1", timeout=1, retries=0)
    with pytest.raises(ValueError, match=r"^ancestor_depth: 2147483648 is out of range"):
        c.explain("m", ancestor_depth=2**31)
    with pytest.raises(ValueError, match=r"^batch: -2147483649 is out of range"):
        c.run_sweep(batch=-(2**31) - 1)
    with pytest.raises(ValueError, match=r"^limit: "):
        c.filter_rank([("m", 0.5)], limit=10**20)
    with pytest.raises(ValueError, match=r"^uses: "):
        c.grant(["send_money"], memory_id="m", uses=2**40)


def test_a_lone_string_for_a_list_and_numbers_past_floats_are_named() -> None:
    """Before: `tags="urgent"` sent six tags and `dependencies="m0"` the memories "m"
    and "0" (a string is a sequence of characters); a number past a float's range
    raised OverflowError; an item that is not a string, protobuf's "bad argument
    type for built-in operation"."""
    c = MemLineageClient("127.0.0.1:1", timeout=1, retries=0)
    for call, said in [
        (lambda: c.record("m", creator="user:a", tags="urgent"), "tags: a list of strings"),
        (lambda: c.record("m", creator="user:a", dependencies="m0"), "dependencies: a list"),
        (lambda: c.record("m", creator="user:a", tags=["a", 1]), "tags[1]: 1 is not a string"),
        (lambda: c.grant("send", memory_id="m"), "actions: a list of strings"),
        (lambda: c.feedback("d1", "m1", success=True), "memory_ids: a list of strings"),
    ]:
        with pytest.raises(TypeError, match=re.escape(said)):
            call()
    for call, name in [
        (lambda: c.record("m", creator="user:a", confidence=10**400), "confidence"),
        (lambda: c.record("m", creator="user:a", created_at=-(10**400)), "created_at"),
        (lambda: c.check("read", "m", budget=10**400), "budget"),
        (lambda: c.filter_rank([("m", 10**400)]), "candidates[0].similarity"),
        (lambda: c.run_sweep(at=10**400), "at"),
    ]:
        with pytest.raises(ValueError, match=re.escape(f"{name}: a number past a float's range")):
            call()


def test_constructor_validates() -> None:
    with pytest.raises(ValueError, match="timeout"):
        MemLineageClient("127.0.0.1:1", timeout=0)
    with pytest.raises(ValueError, match="retries"):
        MemLineageClient("127.0.0.1:1", retries=-1)


# ---------------------------------------------------------------- health and watch


def test_health(server: Scripted, client: MemLineageClient) -> None:
    server.health.set("", health_pb2.HealthCheckResponse.SERVING)
    assert client.health() == "SERVING"
    server.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert client.health() == "NOT_SERVING"


def events(*cursors: str) -> list[pb.LineageEvent]:
    return [pb.LineageEvent(cursor=c, type="recorded", memory_id=f"m{c}") for c in cursors]


def test_watch_resumes_after_the_last_cursor(
    server: Scripted, client: MemLineageClient, sleeps: list[float]
) -> None:
    def stream(request: pb.WatchRequest, context: grpc.ServicerContext) -> Iterator[Any]:
        if not request.cursor:
            yield from events("1", "2")
            context.abort(UNAVAILABLE, "restarting")
        yield from events(str(int(request.cursor) + 1))

    server.handlers["Watch"] = stream
    got = [e.cursor for e in client.watch(from_oldest=True)]
    assert got == ["1", "2", "3"]
    first, second = server.requests("Watch")
    assert (first.cursor, first.from_oldest, first.namespace) == ("", True, "tenant-a")
    assert (second.cursor, second.from_oldest) == ("2", False)
    assert len(sleeps) == 1


def test_async_watch_resumes_after_the_last_cursor_with_its_own_sleep(server: Scripted) -> None:
    def stream(request: pb.WatchRequest, context: grpc.ServicerContext) -> Iterator[Any]:
        if not request.cursor:
            yield from events("1", "2")
            context.abort(UNAVAILABLE, "restarting")
        yield from events(str(int(request.cursor) + 1))

    server.handlers["Watch"] = stream
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def run() -> list[str]:
        async with AsyncMemLineageClient(
            server.target, namespace="tenant-a", sleep=sleep, rng=lambda: 1.0
        ) as c:
            return [e.cursor async for e in c.watch(from_oldest=True)]

    assert asyncio.run(run()) == ["1", "2", "3"]
    first, second = server.requests("Watch")
    assert (first.cursor, first.from_oldest, first.namespace) == ("", True, "tenant-a")
    assert (second.cursor, second.from_oldest) == ("2", False)
    assert slept == [0.05]


def test_watch_cancel_from_another_thread_ends_iteration(
    server: Scripted, client: MemLineageClient
) -> None:
    def stream(request: pb.WatchRequest, context: grpc.ServicerContext) -> Iterator[Any]:
        yield from events("1")
        while context.is_active():
            time.sleep(0.01)

    server.handlers["Watch"] = stream
    watch = client.watch()
    assert next(watch).cursor == "1"
    timer = threading.Timer(0.1, watch.cancel)
    timer.start()
    assert list(watch) == []
    timer.join()
    assert watch.cursor == "1"


def test_watch_expired_cursor_raises(server: Scripted, client: MemLineageClient) -> None:
    server.handlers["Watch"] = fail_then(
        1, grpc.StatusCode.OUT_OF_RANGE, "cursor expired", lambda r, c: iter(())
    )
    with pytest.raises(OutOfRange):
        next(client.watch(cursor="old"))


# ---------------------------------------------------------------- layering


def test_client_imports_no_server_module() -> None:
    """The client package loads only itself and the generated memlineage.v1 code."""
    code = (
        "import sys, memlineage.client; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('memlineage'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()
    assert "memlineage.client.sync" in out
    assert [
        m
        for m in out
        if m != "memlineage" and not m.startswith(("memlineage.client", "memlineage.v1"))
    ] == []

"""Bad input as an attacker sends it, through a real sidecar: each case answers the
status of the error contract and names the request field to blame (never a
parameter inside the sidecar), and a `memlineage serve` given a bad TLS pair says
which file is wrong and how, instead of "Failed to bind".

The contract: bytes that are no request message are INVALID_ARGUMENT `request: is
not a valid memlineage.v1.XRequest message (...)` on every RPC; an input out of its
range, count or shape is INVALID_ARGUMENT `<field>: ...` with the field as the
request spells it (`memory_ids`, `candidates`, `ancestor_depth`, `time.nanos`,
`memory.created_at.seconds`, `decision_id`); the caller is authenticated before
the bytes are read."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from memlineage.config import Config
from memlineage.grpc_api.auth import TokenGrant
from memlineage.grpc_api.servicer import MemLineageService
from memlineage.v1 import memlineage_pb2 as pb
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

ML = "/memlineage.v1.MemLineage/"
ADMIN = "/memlineage.v1.PolicyAdmin/"
UNARY = {
    ML + "Record": "RecordRequest",
    ML + "Check": "CheckRequest",
    ML + "FilterRank": "FilterRankRequest",
    ML + "UpdateStatus": "UpdateStatusRequest",
    ML + "Revise": "ReviseRequest",
    ML + "Feedback": "FeedbackRequest",
    ML + "Explain": "ExplainRequest",
    ML + "RecordGrant": "GrantRequest",
    ML + "Object": "ObjectRequest",
    ADMIN + "ListPolicies": "ListPoliciesRequest",
    ADMIN + "ReloadPolicies": "ReloadPoliciesRequest",
    ADMIN + "LintPolicy": "LintPolicyRequest",
    ADMIN + "RunSweep": "RunSweepRequest",
    ADMIN + "Shadow": "ShadowRequest",
}
# The issue's Record: `memory.id` is "\xff\xfeid:" (not UTF-8), creator user:a.
BAD_UTF8_RECORD = bytes.fromhex("12120a04fffe69643a0a08011206757365723a61")
# Field 1 says 5 bytes follow, 2 do: no message of any type.
TRUNCATED = b"\x0a\x05ab"
# 100,000 nested groups that never end: past any parser's depth.
DEEP = b"\x0b" * 100_000
WAIT = 10.0


class Sidecar:
    def __init__(self, running: RunningSidecar) -> None:
        self.running = running
        self.channel = grpc.insecure_channel(running.address)

    @property
    def service(self) -> MemLineageService:
        assert self.running.sidecar is not None
        return self.running.sidecar.service

    def call(
        self, method: str, request: bytes | Message, metadata: tuple[tuple[str, str], ...] = ()
    ) -> bytes:
        data = request if isinstance(request, bytes) else request.SerializeToString()
        call = self.channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        answer: bytes = call(data, timeout=WAIT, metadata=metadata)
        return answer

    def error(
        self, method: str, request: bytes | Message, metadata: tuple[tuple[str, str], ...] = ()
    ) -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as info:
            self.call(method, request, metadata)
        return info.value


@pytest.fixture(scope="module")
def sidecar() -> Iterator[Sidecar]:
    with RunningSidecar() as running:
        s = Sidecar(running)
        creator = pb.Creator(kind=pb.CREATOR_KIND_USER, id="user:alice")
        s.call(ML + "Record", pb.RecordRequest(memory=pb.Memory(id="m1", creator=creator)))
        try:
            yield s
        finally:
            s.channel.close()


def invalid(err: grpc.RpcError, field: str) -> str:
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (err.code(), err.details())
    details: str = err.details()
    assert details.startswith(f"{field}: "), details
    return details


# ------------------------------------------------------------------ undecodable bytes
def test_the_issues_record_bytes_are_invalid_argument(sidecar: Sidecar) -> None:
    with pytest.raises(UnicodeDecodeError):  # the bytes really are undecodable UTF-8
        BAD_UTF8_RECORD[4:6].decode()
    details = invalid(sidecar.error(ML + "Record", BAD_UTF8_RECORD), "request")
    assert details.startswith("request: is not a valid memlineage.v1.RecordRequest message ("), (
        details
    )
    # protobuf's own words follow in the parentheses; they differ between its
    # versions (the supported range is 5.26 to 7.x), so only the shape is pinned.
    assert details.endswith(")"), details


def test_the_table_names_every_unary_rpc() -> None:
    """A new RPC joins this table (and so the undecodable-bytes tests) or this fails."""
    names = {
        f"/memlineage.v1.{svc.name}/{m.name}"
        for svc in pb.DESCRIPTOR.services_by_name.values()
        for m in svc.methods
        if not m.server_streaming
    }
    assert names == set(UNARY)


@pytest.mark.parametrize("method", sorted(UNARY))
def test_undecodable_bytes_are_invalid_argument_on_every_rpc(sidecar: Sidecar, method: str) -> None:
    for data in (TRUNCATED, DEEP):
        details = invalid(sidecar.error(method, data), "request")
        assert details.startswith(
            f"request: is not a valid memlineage.v1.{UNARY[method]} message ("
        ), details


def test_undecodable_bytes_on_watch(sidecar: Sidecar) -> None:
    call = sidecar.channel.unary_stream(
        ML + "Watch", request_serializer=None, response_deserializer=None
    )
    with pytest.raises(grpc.RpcError) as info:
        list(call(TRUNCATED, timeout=WAIT))
    assert invalid(info.value, "request").startswith(
        "request: is not a valid memlineage.v1.WatchRequest message ("
    ), info.value.details()


HEALTH = "/grpc.health.v1.Health/"
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"


def test_undecodable_bytes_on_health_and_reflection(
    sidecar: Sidecar, caplog: pytest.LogCaptureFixture
) -> None:
    """INVALID_ARGUMENT `request: ...` and nothing logged (before: INTERNAL "Exception
    deserializing request!" and a traceback per call, from services open to anyone)."""
    with caplog.at_level(logging.ERROR):
        for method in ("Check", "Watch"):
            call = (
                sidecar.channel.unary_unary if method == "Check" else sidecar.channel.unary_stream
            )(HEALTH + method, request_serializer=None, response_deserializer=None)
            with pytest.raises(grpc.RpcError) as info:
                answer = call(b"\xff\xff", timeout=WAIT)
                list(answer) if method == "Watch" else None
            assert invalid(info.value, "request").startswith(
                f"request: is not a valid grpc.health.v1.Health.{method} request message"
            ), info.value.details()
        stream = sidecar.channel.stream_stream(
            REFLECTION, request_serializer=None, response_deserializer=None
        )
        with pytest.raises(grpc.RpcError) as info:
            list(stream(iter([b"\xff\xff"]), timeout=WAIT))
        invalid(info.value, "request")
    assert [r.getMessage() for r in caplog.records] == []
    assert sidecar.call(HEALTH + "Check", b"")  # a well-formed probe still answers


def test_idle_health_calls_leave_the_api_its_workers(sidecar: Sidecar) -> None:
    """Health calls that never send their request hold health's own threads: the API's
    workers (embedded) stay free (before: four such calls stopped every call)."""
    stop = threading.Event()

    def never() -> Iterator[bytes]:
        stop.wait(30)
        yield b""

    idle = sidecar.channel.stream_unary(
        HEALTH + "Check", request_serializer=None, response_deserializer=None
    )
    calls = [idle.future(never(), timeout=20) for _ in range(6)]
    try:
        read = pb.CheckRequest(operation=pb.OPERATION_READ, memory_id="m1")
        answer = pb.CheckResponse.FromString(sidecar.call(ML + "Check", read))
        assert answer.decision.effect != pb.EFFECT_UNSPECIFIED
    finally:
        stop.set()
        for call in calls:
            call.cancel()


def test_open_health_watch_streams_leave_the_probes_their_threads(sidecar: Sidecar) -> None:
    """Anyone may open health Watch streams (no token), and each holds its thread while
    open: they run on a pool of their own, so a probe's Check still answers at once
    (before: HEALTH_WATCH_THREADS of them on Check's pool made every probe run to its
    deadline; an orchestrator probing it would restart it in a loop)."""
    from memlineage.grpc_api.standard import HEALTH_WATCH_STREAMS

    watch = sidecar.channel.unary_stream(
        HEALTH + "Watch", request_serializer=None, response_deserializer=None
    )
    streams = [watch(b"", timeout=30) for _ in range(HEALTH_WATCH_STREAMS)]
    try:
        for stream in streams:
            next(stream)  # its first status: the stream holds a thread now
        for _ in range(3):
            started = time.monotonic()
            assert sidecar.call(HEALTH + "Check", b"")  # SERVING, serialised
            assert time.monotonic() - started < 1.0
    finally:
        for stream in streams:
            stream.cancel()


def test_the_caller_is_authenticated_before_the_bytes_are_read() -> None:
    config = Config(
        policy_dir=BUNDLED_POLICIES,
        decision_log="off",
        tokens=(TokenGrant("token-a", ("a",), name="a"),),
    )
    with RunningSidecar(config) as running:
        s = Sidecar(running)
        try:
            err = s.error(ML + "Record", BAD_UTF8_RECORD)
            assert err.code() == grpc.StatusCode.UNAUTHENTICATED, err.details()
            err = s.error(
                ML + "Record", BAD_UTF8_RECORD, metadata=(("authorization", "Bearer token-a"),)
            )
            invalid(err, "request")
        finally:
            s.channel.close()


def test_admin_rights_are_checked_before_the_bytes_are_read() -> None:
    """A tenant's token without admin sending anything to an admin RPC: PERMISSION_DENIED
    (before: INVALID_ARGUMENT for bytes that do not parse, so the admin request was
    parsed, whatever its size, before the caller's rights were looked at)."""
    config = Config(
        policy_dir=BUNDLED_POLICIES,
        decision_log="off",
        tokens=(TokenGrant("token-a", ("a",), name="a"),),
    )
    tenant = (("authorization", "Bearer token-a"),)
    with RunningSidecar(config) as running:
        s = Sidecar(running)
        try:
            for method in ("ListPolicies", "ReloadPolicies", "Shadow", "RunSweep", "LintPolicy"):
                for body in (b"\xff\xff", b""):
                    err = s.error(f"/memlineage.v1.PolicyAdmin/{method}", body, metadata=tenant)
                    assert err.code() == grpc.StatusCode.PERMISSION_DENIED, (method, err.details())
        finally:
            s.channel.close()


def test_callers_without_a_token_hold_no_worker() -> None:
    """Calls that never send their request, from callers without a valid token, are
    answered UNAUTHENTICATED at once and hold no worker: a caller with a token is served
    while twelve of them are open (before: four such calls, one per worker of the
    embedded store, made every other call run to its deadline). Two `authorization`
    headers are refused too (before: the last one won)."""
    config = Config(
        policy_dir=BUNDLED_POLICIES,
        decision_log="off",
        tokens=(TokenGrant("token-a", ("a",), name="a"),),
    )

    def never(stop: threading.Event) -> Iterator[bytes]:
        stop.wait(30)  # sends nothing until the test ends
        yield b""

    with RunningSidecar(config) as running:
        s = Sidecar(running)
        stop = threading.Event()
        try:
            idle = s.channel.stream_unary(
                ML + "Check", request_serializer=None, response_deserializer=None
            )
            calls = [
                idle.future(never(stop), timeout=20, metadata=metadata)
                for metadata in [()] * 6 + [(("authorization", "Bearer wrong"),)] * 6
            ]
            for call in calls:
                assert call.exception(timeout=10).code() == grpc.StatusCode.UNAUTHENTICATED
            token = (("authorization", "Bearer token-a"),)
            answer = s.call(
                ML + "Check",
                pb.CheckRequest(namespace="a", operation=pb.OPERATION_READ, memory_id="x"),
                token,
            )
            assert pb.CheckResponse.FromString(answer).decision.effect != pb.EFFECT_UNSPECIFIED
            twice = (("authorization", "Bearer token-a"), ("authorization", "Bearer token-a"))
            err = s.error(
                ML + "Check",
                pb.CheckRequest(namespace="a", operation=pb.OPERATION_READ, memory_id="x"),
                twice,
            )
            assert err.code() == grpc.StatusCode.UNAUTHENTICATED
            assert err.details() == "more than one `authorization` header"
        finally:
            stop.set()
            s.channel.close()


# ------------------------------------------------------------------ named fields
def test_an_act_with_20000_memory_ids(sidecar: Sidecar) -> None:
    for ids in (["m1"] * 20_000, [f"m{i}" for i in range(20_000)]):
        err = sidecar.error(
            ML + "Check", pb.CheckRequest(operation=pb.OPERATION_ACT, memory_ids=ids, action="book")
        )
        assert invalid(err, "memory_ids") == "memory_ids: has 20000 ids, the limit is 10000"
    # the limit itself is fine
    answer = pb.CheckResponse.FromString(
        sidecar.call(
            ML + "Check",
            pb.CheckRequest(operation=pb.OPERATION_ACT, memory_ids=["m1"] * 10_000, action="book"),
        )
    )
    assert answer.decision.effect != pb.EFFECT_UNSPECIFIED
    # an act names its memories in memory_ids, whatever memory_id says
    err = sidecar.error(ML + "Check", pb.CheckRequest(operation=pb.OPERATION_ACT, memory_id="m1"))
    invalid(err, "memory_ids")


def test_filter_rank_and_feedback_count_their_lists(sidecar: Sidecar) -> None:
    err = sidecar.error(
        ML + "FilterRank",
        pb.FilterRankRequest(
            candidates=[pb.Candidate(memory_id=f"c{i}", similarity=0.5) for i in range(10_001)]
        ),
    )
    assert invalid(err, "candidates") == "candidates: has 10001 candidates, the limit is 10000"
    err = sidecar.error(
        ML + "Feedback",
        pb.FeedbackRequest(memory_ids=[f"f{i}" for i in range(20_000)], success=True),
    )
    invalid(err, "memory_ids")
    err = sidecar.error(
        ML + "Record",
        pb.RecordRequest(
            memory=pb.Memory(
                id="many-deps",
                creator=pb.Creator(kind=pb.CREATOR_KIND_USER, id="user:a"),
                dependencies=[f"d{i}" for i in range(20_000)],
            )
        ),
    )
    assert (
        invalid(err, "memory.dependencies")
        == "memory.dependencies: has 20000 dependencies, the limit is 256"
    )


@pytest.mark.parametrize("field", ["ancestor_depth", "descendant_depth"])
def test_explain_depths_beyond_the_walk_limit(sidecar: Sidecar, field: str) -> None:
    for depth in (2**31 - 1, 65, -1):
        err = sidecar.error(ML + "Explain", pb.ExplainRequest(memory_id="m1", **{field: depth}))
        details = invalid(err, field)
        assert "[0, 64]" in details and str(depth) in details, details
    ok = pb.ExplainResponse.FromString(
        sidecar.call(ML + "Explain", pb.ExplainRequest(memory_id="m1", **{field: 64}))
    )
    assert ok.memory.id == "m1"


def test_feedback_decision_ids(sidecar: Sidecar) -> None:
    for bad, says in (
        ("x" * 100_000, "is 100000 characters long, the limit is 128"),
        ("d1-2-3\x00", "contains '\\x00'"),
        ("not a decision", "contains ' '"),
    ):
        err = sidecar.error(
            ML + "Feedback", pb.FeedbackRequest(decision_id=bad, memory_ids=["m1"], success=True)
        )
        details = invalid(err, "decision_id")
        assert says in details, details
    # a decision this sidecar issued: its memories are the ones reported on
    check = pb.CheckResponse.FromString(
        sidecar.call(ML + "Check", pb.CheckRequest(operation=pb.OPERATION_READ, memory_id="m1"))
    )
    issued = check.decision.decision_id
    assert issued.startswith("d") and issued.count("-") == 2, issued
    done = pb.FeedbackResponse.FromString(
        sidecar.call(ML + "Feedback", pb.FeedbackRequest(decision_id=issued, success=True))
    )
    assert done.updated == 1
    # well formed but unknown here (another sidecar's): reported on memory_ids alone
    done = pb.FeedbackResponse.FromString(
        sidecar.call(
            ML + "Feedback",
            pb.FeedbackRequest(
                decision_id="d18f0c2a1b00-0a1b2c3d-7", memory_ids=["m1"], success=True
            ),
        )
    )
    assert done.updated == 1
    err = sidecar.error(
        ML + "Feedback", pb.FeedbackRequest(decision_id="d18f0c2a1b00-0a1b2c3d-7", success=True)
    )
    assert err.code() == grpc.StatusCode.NOT_FOUND  # nothing to report on: said so
    assert err.details().startswith("decision_id: no decision 'd18f0c2a1b00-0a1b2c3d-7'")


def _ts(seconds: int, nanos: int = 0) -> Timestamp:
    return Timestamp(seconds=seconds, nanos=nanos)


@pytest.mark.parametrize(
    ("seconds", "nanos", "part"),
    [
        (0, -1, "nanos"),
        (0, 1_000_000_000, "nanos"),
        (-1, 0, "seconds"),
        (-(2**63), 0, "seconds"),
        (2**63 - 1, 0, "seconds"),
        (253_402_300_800, 0, "seconds"),
    ],
)
def test_absurd_timestamps_name_their_part(
    sidecar: Sidecar, seconds: int, nanos: int, part: str
) -> None:
    t = _ts(seconds, nanos)
    creator = pb.Creator(kind=pb.CREATOR_KIND_USER, id="user:a")
    cases = [
        (
            "time",
            ML + "Check",
            pb.CheckRequest(operation=pb.OPERATION_READ, memory_id="m1", time=t),
        ),
        (
            "time",
            ML + "FilterRank",
            pb.FilterRankRequest(candidates=[pb.Candidate(memory_id="m1", similarity=1.0)], time=t),
        ),
        (
            "time",
            ML + "Record",
            pb.RecordRequest(memory=pb.Memory(id="ts-1", creator=creator), time=t),
        ),
        (
            "memory.created_at",
            ML + "Record",
            pb.RecordRequest(memory=pb.Memory(id="ts-2", creator=creator, created_at=t)),
        ),
        (
            "time",
            ML + "UpdateStatus",
            pb.UpdateStatusRequest(memory_id="m1", action=pb.STATUS_ACTION_CONFIRM, time=t),
        ),
        ("time", ML + "Feedback", pb.FeedbackRequest(memory_ids=["m1"], time=t)),
        ("time", ADMIN + "RunSweep", pb.RunSweepRequest(time=t)),
    ]
    for field, method, request in cases:
        invalid(sidecar.error(method, request), f"{field}.{part}")


def test_strings_out_of_shape(sidecar: Sidecar) -> None:
    read = pb.OPERATION_READ
    err = sidecar.error(
        ML + "Check",
        pb.CheckRequest(
            operation=read,
            memory_id="m1",
            actor=pb.Actor(kind=pb.CREATOR_KIND_TOOL, id="tool:x\x00" * 50_000),
        ),
    )
    invalid(err, "actor.id")
    err = sidecar.error(
        ML + "Check",
        pb.CheckRequest(operation=pb.OPERATION_ACT, memory_ids=["m1"], action="a" * 257),
    )
    assert invalid(err, "action") == "action: is 257 characters long, the limit is 256"
    err = sidecar.error(
        ML + "Check",
        pb.CheckRequest(operation=pb.OPERATION_ACT, memory_ids=["m1"], action="bo\x00ok"),
    )
    invalid(err, "action")
    err = sidecar.error(
        ML + "UpdateStatus",
        pb.UpdateStatusRequest(memory_id="m1", action=pb.STATUS_ACTION_REVOKE, expected_version=-1),
    )
    invalid(err, "expected_version")
    # the store's names for a record's fields, as the request spells them
    creator = pb.Creator(kind=pb.CREATOR_KIND_USER, id="user:a")
    err = sidecar.error(
        ML + "Record",
        pb.RecordRequest(
            memory=pb.Memory(
                id="long-value",
                creator=creator,
                claim=pb.Claim(subject="s", attribute="a", value="v" * 5000),
            )
        ),
    )
    invalid(err, "memory.claim.value")
    err = sidecar.error(
        ML + "Record",
        pb.RecordRequest(
            memory=pb.Memory(
                id="bad-subject", creator=creator, claim=pb.Claim(subject="s s", attribute="a")
            )
        ),
    )
    invalid(err, "memory.claim.subject")
    err = sidecar.error(
        ML + "Record",
        pb.RecordRequest(
            memory=pb.Memory(
                id="bad-creator", creator=pb.Creator(kind=pb.CREATOR_KIND_USER, id="user a")
            )
        ),
    )
    invalid(err, "memory.creator.id")


def test_details_that_quote_the_input_stay_short(sidecar: Sidecar) -> None:
    err = sidecar.error(
        ML + "Check",
        pb.CheckRequest(namespace="n" * 100_000, operation=pb.OPERATION_READ, memory_id="m1"),
    )
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED, err.details()
    assert err.details().startswith("namespace: this caller may not use namespace 'nnn")
    assert len(err.details()) <= 1000


def test_a_rejected_reload_cannot_forge_log_lines(
    sidecar: Sidecar, caplog: pytest.LogCaptureFixture
) -> None:
    """A name with a newline is refused as a name, quoted escaped; a long name whose set
    does not compile is logged on one bounded line."""
    evil = "p.mlp\n2024-01-01 memlineage.auth admin login accepted"
    with caplog.at_level(logging.WARNING, logger="memlineage.grpc"):
        err = sidecar.error(
            ADMIN + "ReloadPolicies", pb.ReloadPoliciesRequest(files={evil: "x" * 5000})
        )
        answer = pb.ReloadPoliciesResponse.FromString(
            sidecar.call(
                ADMIN + "ReloadPolicies",
                pb.ReloadPoliciesRequest(files={"p" * 5000 + ".mlp": "x" * 5000}),
            )
        )
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "\n" not in err.details() and 'files["p.mlp\\n2024' in err.details(), err.details()
    assert not answer.applied
    lines = [r.getMessage() for r in caplog.records if r.name == "memlineage.grpc"]
    assert len(lines) == 1 and lines[0].startswith("policy reload rejected: "), lines
    assert "\n" not in lines[0] and "pppp" in lines[0], lines[0]
    assert len(lines[0]) < 600, len(lines[0])


def test_large_check_requests_are_decided_but_not_remembered(sidecar: Sidecar) -> None:
    memo = sidecar.service.check_memo
    small = pb.CheckRequest(
        operation=pb.OPERATION_READ,
        memory_id="m1",
        actor=pb.Actor(kind=pb.CREATOR_KIND_USER, id="user:memo"),
    )
    before = len(memo)
    sidecar.call(ML + "Check", small)
    assert len(memo) == before + 1
    # the same request padded with an unknown field (kept in the bytes): 100 KB
    padded = (
        small.SerializeToString() + b"\xfa\x3e" + bytes([0x80 | 0x20, 0x8D, 0x06]) + b"x" * 100_000
    )
    assert pb.CheckRequest.FromString(padded).ListFields() == small.ListFields()
    for _ in range(3):
        answer = pb.CheckResponse.FromString(sidecar.call(ML + "Check", padded))
        assert answer.decision.effect == pb.EFFECT_ALLOW
    assert len(memo) == before + 1


# ------------------------------------------------------------------ TLS
def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("tls")
    files = {name: d / f"{name}.pem" for name in ("cert", "key", "other_cert", "other_key")}
    for cert, key, cn in (("cert", "key", "localhost"), ("other_cert", "other_key", "other")):
        _openssl(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            f"/CN={cn}",
            "-keyout",
            str(files[key]),
            "-out",
            str(files[cert]),
        )
    files["garbage"] = d / "garbage.pem"
    files["garbage"].write_bytes(bytes(range(256)) * 8)
    files["missing"] = d / "missing.pem"
    files["huge"] = d / "huge.pem"  # as a mistyped /dev/urandom, bounded
    files["huge"].write_bytes(b"-----BEGIN CERTIFICATE-----\n" + b"A" * (2 << 20))
    return files


def _serve(tmp: Path, cert: Path, key: Path) -> subprocess.CompletedProcess[str]:
    config = tmp / "memlineage.toml"
    config.write_text(f'tls_cert = "{cert}"\ntls_key = "{key}"\n')
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "memlineage",
            "serve",
            "--config",
            str(config),
            "--listen",
            "127.0.0.1:0",
            "--policies",
            BUNDLED_POLICIES,
            "--decision-log",
            "off",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("cert", "key", "blamed", "problem"),
    [
        ("garbage", "key", "certificate", "is not a PEM certificate"),
        ("key", "key", "certificate", "is not a PEM certificate"),
        ("cert", "garbage", "key", "is not a PEM private key"),
        ("cert", "cert", "key", "is not a PEM private key"),
        ("cert", "other_key", "key", "does not match the certificate"),
        ("missing", "key", "certificate", "cannot be read (No such file or directory)"),
        ("cert", "missing", "key", "cannot be read (No such file or directory)"),
        ("huge", "key", "certificate", "is larger than 1 MiB: not a PEM certificate file"),
        ("cert", "huge", "key", "is larger than 1 MiB: not a PEM key file"),
        ("/dev/urandom", "key", "certificate", "is larger than 1 MiB"),  # read without end
    ],
)
def test_serve_names_the_bad_tls_file(
    tmp_path: Path, tls_files: dict[str, Path], cert: str, key: str, blamed: str, problem: str
) -> None:
    files = {**tls_files, "/dev/urandom": Path("/dev/urandom")}
    done = _serve(tmp_path, files[cert], files[key])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    path = files[cert if blamed == "certificate" else key]
    assert f"error: TLS {blamed} {path}: {problem}" in done.stderr, done.stderr
    assert "Failed to bind" not in done.stderr


def test_a_certificate_outside_its_validity_is_named(tls_files: dict[str, Path]) -> None:
    """Served (a renewal may be on its way) but said at start: an expired certificate
    started without a word, and every client then failed its handshake."""
    from memlineage.grpc_api.server import validity_problem

    cert = str(tls_files["cert"])  # valid for a day from its making
    assert validity_problem(cert, time.time()) is None
    expired = validity_problem(cert, time.time() + 3 * 86400)
    assert expired is not None and expired.startswith("expired on ")
    early = validity_problem(cert, time.time() - 3 * 86400)
    assert early is not None and early.startswith("is not valid before ")


def test_serve_with_a_good_tls_pair_starts(tmp_path: Path, tls_files: dict[str, Path]) -> None:
    """The checks refuse nothing grpc serves: the bundled pair still comes up."""
    config = tmp_path / "memlineage.toml"
    config.write_text(f'tls_cert = "{tls_files["cert"]}"\ntls_key = "{tls_files["key"]}"\n')
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memlineage",
            "serve",
            "--config",
            str(config),
            "--listen",
            "127.0.0.1:0",
            "--policies",
            BUNDLED_POLICIES,
            "--decision-log",
            "off",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "memlineage serving on 127.0.0.1:" in line, line
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_an_unknown_volatility_class_is_refused(sidecar: Sidecar) -> None:
    """A class the server's scoring does not define would decay as the default one (no
    decay by default): a typo is refused, naming the classes; nothing is recorded."""
    creator = pb.Creator(kind=pb.CREATOR_KIND_TOOL, id="tool:metrics")
    err = sidecar.error(
        ML + "Record",
        pb.RecordRequest(memory=pb.Memory(id="cpu", creator=creator, volatility="hgih")),
    )
    assert invalid(err, "memory.volatility") == (
        "memory.volatility: unknown volatility class 'hgih'; this server's classes: "
        "high, low, medium, static (setting scoring.half_lives)"
    )
    err = sidecar.error(ML + "Explain", pb.ExplainRequest(memory_id="cpu"))
    assert err.code() == grpc.StatusCode.NOT_FOUND


def test_one_caller_cannot_take_every_watch_stream() -> None:
    """A caller holds at most WATCH_STREAMS_PER_CALLER Watch streams: the next one is
    RESOURCE_EXHAUSTED at once, and another tenant's Watch gets its events (before: 300
    idle streams of one tenant filled the pool of 256, and the other's Watch received
    nothing). A stream closed frees its place."""
    from memlineage.grpc_api.servicer import WATCH_STREAMS_PER_CALLER

    config = Config(
        policy_dir=BUNDLED_POLICIES,
        decision_log="off",
        tokens=(TokenGrant("token-a", ("a",), name="a"), TokenGrant("token-b", ("b",), name="b")),
    )
    alice, bob = (("authorization", "Bearer token-a"),), (("authorization", "Bearer token-b"),)
    with RunningSidecar(config) as running:
        s = Sidecar(running)
        watch = s.channel.unary_stream(ML + "Watch")
        req = pb.WatchRequest(namespace="a").SerializeToString()
        held = [watch(req, timeout=60, metadata=alice) for _ in range(WATCH_STREAMS_PER_CALLER)]
        try:
            deadline = time.monotonic() + 30
            while s.service._watching.get("a", 0) < WATCH_STREAMS_PER_CALLER:
                assert time.monotonic() < deadline, s.service._watching
                time.sleep(0.05)
            extra = watch(req, timeout=10, metadata=alice)
            with pytest.raises(grpc.RpcError) as err:
                next(extra)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert err.value.details().startswith(
                f"this caller has {WATCH_STREAMS_PER_CALLER} Watch streams open"
            )
            s.call(
                ML + "Record",
                pb.RecordRequest(
                    namespace="b",
                    memory=pb.Memory(
                        id="m", creator=pb.Creator(kind=pb.CREATOR_KIND_USER, id="user:b")
                    ),
                ),
                bob,
            )
            theirs = watch(
                pb.WatchRequest(namespace="b", from_oldest=True).SerializeToString(),
                timeout=10,
                metadata=bob,
            )
            first = pb.LineageEvent.FromString(next(theirs))
            assert first.memory_id == "m"
            theirs.cancel()
            held.pop().cancel()
            deadline = time.monotonic() + 10
            while s.service._watching.get("a", 0) >= WATCH_STREAMS_PER_CALLER:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            oldest = pb.WatchRequest(namespace="a", from_oldest=True).SerializeToString()
            again = watch(oldest, timeout=10, metadata=alice)  # from the oldest: no race
            s.call(
                ML + "Record",
                pb.RecordRequest(
                    namespace="a",
                    memory=pb.Memory(
                        id="n", creator=pb.Creator(kind=pb.CREATOR_KIND_USER, id="user:a")
                    ),
                ),
                alice,
            )
            assert pb.LineageEvent.FromString(next(again)).memory_id == "n"
            again.cancel()
        finally:
            for call in held:
                call.cancel()
            s.channel.close()


def test_errors_name_the_request_fields(sidecar: Sidecar) -> None:
    """Each refusal names the field of the request it is about, as the proto names it
    (before: `ids`, `id`, `successor`, `status`, and a revision's `(None, None)`), and
    careless requests are refused rather than half taken."""
    user = pb.Creator(kind=pb.CREATOR_KIND_USER, id="user:alice")
    for mid, deps in (("base", []), ("kid", ["base"]), ("gone", [])):
        sidecar.call(
            ML + "Record",
            pb.RecordRequest(memory=pb.Memory(id=mid, creator=user, dependencies=deps)),
        )
    sidecar.call(
        ML + "UpdateStatus",
        pb.UpdateStatusRequest(memory_id="gone", action=pb.STATUS_ACTION_REVOKE, reason="x"),
    )
    many = [
        pb.ActArgument(name=f"a{i}", sources=[f"s{i}-{j}" for j in range(256)]) for i in range(64)
    ]
    err = sidecar.error(
        ML + "Check", pb.CheckRequest(operation=pb.OPERATION_ACT, action="pay", arguments=many)
    )
    assert invalid(err, "arguments").startswith("arguments: name 16384 memories in all")
    err = sidecar.error(
        ML + "Check",
        pb.CheckRequest(operation=pb.OPERATION_READ, memory_id="base", memory_ids=["kid"]),
    )
    invalid(err, "memory_ids")
    err = sidecar.error(ML + "Explain", pb.ExplainRequest(memory_id="nobody"))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert err.details() == "memory_id: no memory 'nobody' in this namespace"

    def update(action: int, **kw: str) -> grpc.RpcError:
        return sidecar.error(
            ML + "UpdateStatus",
            pb.UpdateStatusRequest(memory_id="base", action=action, reason="r", **kw),
        )

    invalid(update(pb.STATUS_ACTION_REVOKE, successor_id="kid"), "successor_id")
    invalid(update(pb.STATUS_ACTION_SUPERSEDE, successor_id="base"), "successor_id")
    for successor, says in (("gone", "is revoked"), ("kid", "rests on 'base'")):
        err = update(pb.STATUS_ACTION_SUPERSEDE, successor_id=successor)
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION, err.details()
        assert err.details().startswith(f"successor_id: successor '{successor}' {says}")
    err = update(pb.STATUS_ACTION_CONFIRM)
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert err.details().startswith("action: "), err.details()
    explained = pb.ExplainResponse.FromString(
        sidecar.call(ML + "Explain", pb.ExplainRequest(memory_id="base"))
    )
    assert explained.memory.status == pb.STATUS_ACTIVE  # none of these applied anything
    err = sidecar.error(
        ML + "Revise",
        pb.ReviseRequest(
            memory=pb.Memory(
                id="base", creator=user, claim=pb.Claim(subject="user:alice", attribute="x")
            ),
            expected_version=1,
        ),
    )
    details = invalid(err, "memory.claim.subject")
    assert details.endswith(
        "the memory was recorded with no claim, and a revision cannot add one; record "
        "another memory for the claim"
    ), details


def test_health_watch_streams_past_their_bound_are_refused_at_once() -> None:
    """On the synchronous server each open health Watch holds a thread: the next one
    past HEALTH_WATCH_STREAMS is RESOURCE_EXHAUSTED at once (before: it waited on the
    pool to its deadline, so 8 streams held open by anyone, no token needed, kept
    every other health Watch waiting; an outside audit); one closed makes room."""
    from memlineage.grpc_api.standard import HEALTH_WATCH_STREAMS

    config = Config(policy_dir=BUNDLED_POLICIES, decision_log="off")
    with RunningSidecar(config, pinned=True) as running:  # the sync server's pools
        s = Sidecar(running)
        streams: list[Any] = []
        try:
            watch = s.channel.unary_stream(
                HEALTH + "Watch", request_serializer=None, response_deserializer=None
            )
            streams += [watch(b"", timeout=30) for _ in range(HEALTH_WATCH_STREAMS)]
            for stream in streams:
                next(stream)  # open, holding its thread
            started = time.monotonic()
            with pytest.raises(grpc.RpcError) as refused:
                next(watch(b"", timeout=30))
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert time.monotonic() - started < 5
            assert s.call(HEALTH + "Check", b"")  # probes still answered
            streams[0].cancel()
            deadline = time.monotonic() + 10
            while True:  # the cancelled stream's place comes back
                again = watch(b"", timeout=30)
                try:
                    next(again)
                    break
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
            again.cancel()
        finally:
            for stream in streams:
                stream.cancel()
            s.channel.close()

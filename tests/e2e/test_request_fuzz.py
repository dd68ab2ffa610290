"""Every RPC of a real sidecar, fed what an attacker sends: random bytes, mutations
of valid encoded requests (bit flips, truncations, insertions, splices) and valid
messages with extreme field values. No answer may be UNKNOWN or INTERNAL (the
caller's input is never the server's error), every OK answer must parse as the
RPC's response message, and afterwards the sidecar still decides a Check as it
did before.

Bounded: a fixed number of cases per RPC from a fixed seed, and a wall-clock cap
per sidecar (`BUDGET_SECONDS`); a failure prints the RPC and the request's bytes
(hex) to replay it with."""

from __future__ import annotations

import functools
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass
from memlineage.client import MemLineageClient
from memlineage.config import Config
from memlineage.lineage.clock import ManualClock
from memlineage.v1 import memlineage_pb2 as pb
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

SEED = 20240611
BUDGET_SECONDS = 20.0  # per sidecar; the cases below take a fraction of it
RANDOM_CASES, MUTATED_CASES, EXTREME_CASES = 40, 90, 70
WATCH_CASES = 25
WAIT = 10.0
FORBIDDEN = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
MAX_REQUEST = 3_500_000  # under the server's 4 MiB receive limit

ML, ADMIN = "/memlineage.v1.MemLineage/", "/memlineage.v1.PolicyAdmin/"
USER = pb.Creator(kind=pb.CREATOR_KIND_USER, id="user:alice")
TOOL = pb.Creator(kind=pb.CREATOR_KIND_TOOL, id="tool:flight_api")
POLICY = 'policy p priority 10 {\n  on read\n  when memory.confidence < 0.5\n  deny "low"\n}\n'


def _seeds(decision_id: str) -> dict[str, tuple[type[Message], type[Message], list[Message]]]:
    """Per RPC: request class, response class, valid requests (to mutate)."""
    ts = pb.RecordRequest().time.__class__
    return {
        ML + "Record": (
            pb.RecordRequest,
            pb.RecordResponse,
            [
                pb.RecordRequest(
                    memory=pb.Memory(
                        id="r1",
                        creator=USER,
                        type="preference",
                        tags=["a", "b"],
                        claim=pb.Claim(subject="alice", attribute="seat", value="aisle"),
                    )
                ),
                pb.RecordRequest(
                    memory=pb.Memory(
                        id="r2",
                        creator=TOOL,
                        dependencies=["m1"],
                        creator_confidence=0.5,
                        volatility="high",
                        created_at=ts(seconds=int(T0)),
                    ),
                    actor=pb.Actor(kind=pb.CREATOR_KIND_AGENT, id="agent:p"),
                    budget=0.5,
                ),
            ],
        ),
        ML + "Check": (
            pb.CheckRequest,
            pb.CheckResponse,
            [
                pb.CheckRequest(operation=pb.OPERATION_READ, memory_id="m1"),
                pb.CheckRequest(
                    operation=pb.OPERATION_ACT,
                    action="send_money",
                    arguments=[
                        pb.ActArgument(name="recipient", sources=["m1"], value="IBAN1"),
                        pb.ActArgument(name="amount", sources=["m2", "ghost"], digest="d"),
                        pb.ActArgument(name="memo"),
                    ],
                ),
                pb.CheckRequest(
                    operation=pb.OPERATION_ACT,
                    memory_ids=["m1", "m2"],
                    action="book",
                    budget=0.2,
                    historical=True,
                    actor=pb.Actor(kind=pb.CREATOR_KIND_TOOL, id="tool:x"),
                    time=ts(seconds=int(T0) - 60, nanos=5),
                ),
            ],
        ),
        ML + "FilterRank": (
            pb.FilterRankRequest,
            pb.FilterRankResponse,
            [
                pb.FilterRankRequest(
                    candidates=[
                        pb.Candidate(memory_id="m1", similarity=0.9),
                        pb.Candidate(memory_id="m2", similarity=0.4),
                        pb.Candidate(memory_id="ghost"),
                    ],
                    limit=1,
                    budget=1.0,
                )
            ],
        ),
        ML + "UpdateStatus": (
            pb.UpdateStatusRequest,
            pb.UpdateStatusResponse,
            [
                pb.UpdateStatusRequest(
                    memory_id="m2",
                    action=pb.STATUS_ACTION_REVOKE,
                    reason="wrong",
                    expected_version=1,
                ),
                pb.UpdateStatusRequest(
                    memory_id="m1",
                    action=pb.STATUS_ACTION_SUPERSEDE,
                    successor_id="m2",
                    actor=pb.Actor(kind=pb.CREATOR_KIND_USER, id="user:alice"),
                ),
            ],
        ),
        ML + "Feedback": (
            pb.FeedbackRequest,
            pb.FeedbackResponse,
            [
                pb.FeedbackRequest(decision_id=decision_id, success=True, note="ok"),
                pb.FeedbackRequest(memory_ids=["m1", "m2"], success=False),
            ],
        ),
        ML + "Explain": (
            pb.ExplainRequest,
            pb.ExplainResponse,
            [pb.ExplainRequest(memory_id="m2", ancestor_depth=3, descendant_depth=2, decisions=5)],
        ),
        ADMIN + "ListPolicies": (
            pb.ListPoliciesRequest,
            pb.ListPoliciesResponse,
            [pb.ListPoliciesRequest()],
        ),
        ADMIN + "ReloadPolicies": (
            pb.ReloadPoliciesRequest,
            pb.ReloadPoliciesResponse,
            [pb.ReloadPoliciesRequest(files={"p.mlp": POLICY})],
        ),
        ADMIN + "LintPolicy": (
            pb.LintPolicyRequest,
            pb.LintPolicyResponse,
            [pb.LintPolicyRequest(files={"p.mlp": POLICY, "q.mlp": "policy {"})],
        ),
        ADMIN + "RunSweep": (
            pb.RunSweepRequest,
            pb.RunSweepResponse,
            [pb.RunSweepRequest(batch=10, time=ts(seconds=int(T0)))],
        ),
        ML + "RecordGrant": (
            pb.GrantRequest,
            pb.GrantResponse,
            [
                pb.GrantRequest(
                    grant=pb.Grant(
                        actions=["send_*"],
                        arguments=["amount"],
                        memory_id="m1",
                        uses=2,
                        value="100",
                        expires_at=ts(seconds=int(T0) + 600),
                    )
                ),
                pb.GrantRequest(
                    grant=pb.Grant(id="g1", actions=["a"], source="tool:*"),
                    actor=pb.Actor(kind=pb.CREATOR_KIND_TOOL, id="tool:x"),
                ),
            ],
        ),
        ML + "Object": (
            pb.ObjectRequest,
            pb.ObjectResponse,
            [
                pb.ObjectRequest(
                    memory_id="m1",
                    reason="still needed",
                    actor=pb.Actor(kind=pb.CREATOR_KIND_AGENT, id="agent:p"),
                )
            ],
        ),
        ADMIN + "Shadow": (
            pb.ShadowRequest,
            pb.ShadowResponse,
            [
                pb.ShadowRequest(),
                pb.ShadowRequest(action=pb.SHADOW_ACTION_LOAD, files={"p.mlp": POLICY}),
                pb.ShadowRequest(action=pb.SHADOW_ACTION_DROP),
            ],
        ),
    }


# ------------------------------------------------------------------ inputs
def random_bytes(rng: random.Random) -> bytes:
    """Plain noise, or noise shaped like protobuf (tags, varints, lengths) so that
    more of it gets past the parser into the servicer."""
    if rng.random() < 0.4:
        return rng.randbytes(rng.choice((0, 1, 2, 5, 17, 64, 300, 4096)))
    out = bytearray()
    for _ in range(rng.randint(1, 8)):
        number, wire = (
            rng.choice((1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 2047)),
            rng.choice((0, 0, 1, 2, 2, 2, 5, 3, 7)),
        )
        out += _varint(number << 3 | wire)
        if wire == 0:
            out += _varint(rng.choice((0, 1, 2**31 - 1, 2**63 - 1, 2**64 - 1, 99)))
        elif wire == 1:
            out += rng.randbytes(8)
        elif wire == 5:
            out += rng.randbytes(4)
        elif wire == 2:
            body = rng.choice(
                (
                    b"m1",
                    b"\xff\xfe",
                    rng.randbytes(rng.randint(0, 40)),
                    bytes(random_bytes(rng)) if rng.random() < 0.3 else b"",
                )
            )
            out += _varint(len(body) + rng.choice((0, 0, 0, 1, -1 if body else 0)))
            out += body
    return bytes(out)


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def mutate(rng: random.Random, data: bytes, others: list[bytes]) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(7)
        if op == 0 and b:  # flip bits
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 1 and b:  # a boundary byte
            b[rng.randrange(len(b))] = rng.choice((0x00, 0x7F, 0x80, 0xFF))
        elif op == 2:  # truncate
            del b[rng.randint(0, len(b)) :]
        elif op == 3:  # insert noise
            at = rng.randint(0, len(b))
            b[at:at] = rng.randbytes(rng.randint(1, 8))
        elif op == 4 and b:  # delete a span
            at = rng.randrange(len(b))
            del b[at : at + rng.randint(1, 8)]
        elif op == 5 and b:  # repeat a span (fields given twice)
            at = rng.randrange(len(b))
            b += b[at : at + rng.randint(1, 32)]
        else:  # splice with another valid request
            other = rng.choice(others)
            b = b[: rng.randint(0, len(b))] + other[rng.randint(0, len(other)) :]
    return bytes(b)


INT32S = (0, 1, -1, 2, 7, 63, 64, 65, 10_000, 10_001, 2**31 - 1, -(2**31))
INT64S = (*INT32S, 2**53 + 1, 253_402_300_799, 253_402_300_800, int(T0), 2**63 - 1, -(2**63))
DOUBLES = (
    0.0,
    -0.0,
    0.5,
    1.0,
    -1.0,
    1.5,
    1e-300,
    5e-324,
    1e308,
    -1e308,
    math.inf,
    -math.inf,
    math.nan,
)
SHORT = (
    "",
    "m1",
    "m2",
    "ghost",
    "default",
    "user:alice",
    "tool:x",
    "bad id",
    "\x00",
    "a\x00b",
    "a\nb",
    "é",
    "\U0001f642",
    "\u202e",
    "x" * 129,
    "%s%n{}",
    "../../etc/passwd",
    "/dev/zero",
    "d1-2-3",
    "read",
    "act",
    "high",
    "policy p {",
)
LONG = ("x" * 5000, "y" * 100_000, POLICY)
# Per field name, values that pass its checks: drawn half of the time, so that the
# extremes elsewhere in the message reach past the first refusal.
VALID: dict[str, tuple[str, ...]] = {
    "namespace": ("", "default"),
    "memory_id": ("m1", "m2", "ghost"),
    "successor_id": ("m1", "m2"),
    "memory_ids": ("m1", "m2"),
    "dependencies": ("m1", "m2"),
    "cursor": ("",),
    "type": ("fact", "preference", "tool_result"),
    "volatility": ("high", "low", "static", ""),
    "subject": ("alice",),
    "attribute": ("seat", "city"),
    "value": ("aisle", ""),
    "reason": ("", "wrong"),
    "action": ("", "book"),
    "context_id": ("", "ctx-1"),
    "tags": ("a", "flight_price"),
}
NUMBERS: dict[str, tuple[float, ...]] = {
    "seconds": (int(T0), int(T0) - 3600),
    "nanos": (0, 5),
    "creator_confidence": (0.5, 1.0),
    "similarity": (0.2, 0.9),
    "budget": (0.0, 1.0),
    "expected_version": (0, 1),
    "ancestor_depth": (0, 3),
    "descendant_depth": (0, 3),
    "decisions": (0, 5),
    "limit": (0, 2),
    "batch": (0, 10),
}
SIZES = (0, 0, 1, 2, 5, 300)
# The policy RPCs compile what they are sent: fewer cases, the same kinds.
SCALE = {ADMIN + "ReloadPolicies": 3, ADMIN + "LintPolicy": 2}


@dataclass
class Extremes:
    """Messages of a class, every field drawn from its type's boundary values (or,
    half of the time for fields named in `VALID`, from values that pass)."""

    rng: random.Random
    decision_id: str
    fresh: int = 0

    def message(self, desc: Descriptor, cls: Any, depth: int = 0) -> Message:
        msg = cls()
        big = self.rng.random() < 0.1  # at most one list per message goes past a limit
        for f in desc.fields:
            if self.rng.random() < (0.15 if f.message_type is not None else 0.25):
                continue  # unset
            if f.message_type is not None and f.message_type.GetOptions().map_entry:
                for _ in range(self.rng.choice((0, 1, 2, 3, 50))):
                    getattr(msg, f.name)[self.string(f.name)] = self.string("")
            elif f.is_repeated:
                n = self.rng.choice(SIZES)
                if big:
                    n, big = self.rng.choice((257, 10_001)), False
                target = getattr(msg, f.name)
                if f.message_type is not None:
                    if depth < 2:
                        cls_of = GetMessageClass(f.message_type)
                        for _ in range(min(n, 20)):
                            target.add().CopyFrom(self.message(f.message_type, cls_of, depth + 1))
                else:
                    one = self.scalar(f, short=n > 5)
                    target.extend(
                        [
                            one if self.rng.random() < 0.8 else self.scalar(f, short=n > 5)
                            for _ in range(n)
                        ]
                    )
            elif f.message_type is not None:
                if depth < 3:
                    sub = getattr(msg, f.name)
                    sub.CopyFrom(self.message(f.message_type, type(sub), depth + 1))
                    sub.SetInParent()
            else:
                setattr(msg, f.name, self.scalar(f))
        return msg

    def string(self, name: str, short: bool = False) -> str:
        roll = self.rng.random()
        if name == "id" and roll < 0.7:
            self.fresh += 1
            return f"fuzz-{self.fresh}"
        if name == "decision_id" and roll < 0.5:
            return self.decision_id
        if name in VALID and roll < 0.7:
            return self.rng.choice(VALID[name])
        if not short and roll > 0.95:
            return self.rng.choice(LONG)
        return self.rng.choice(SHORT)

    def scalar(self, f: FieldDescriptor, short: bool = False) -> Any:
        t = f.type
        if f.name in NUMBERS and self.rng.random() < 0.7:
            return type(f.default_value)(self.rng.choice(NUMBERS[f.name]))
        if t == FieldDescriptor.TYPE_STRING:
            return self.string(f.name, short)
        if t == FieldDescriptor.TYPE_BYTES:
            return self.rng.randbytes(self.rng.randint(0, 16))
        if t == FieldDescriptor.TYPE_BOOL:
            return self.rng.random() < 0.5
        if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
            return self.rng.choice(DOUBLES)
        if t == FieldDescriptor.TYPE_ENUM:
            top = max(v.number for v in f.enum_type.values)
            if self.rng.random() < 0.75:
                return self.rng.randint(1, top)
            return self.rng.choice((0, top + 1, 99, -1, 2**31 - 1, -(2**31)))
        if t in (
            FieldDescriptor.TYPE_INT32,
            FieldDescriptor.TYPE_SINT32,
            FieldDescriptor.TYPE_SFIXED32,
        ):
            return self.rng.choice(INT32S)
        if t in (
            FieldDescriptor.TYPE_INT64,
            FieldDescriptor.TYPE_SINT64,
            FieldDescriptor.TYPE_SFIXED64,
        ):
            return self.rng.choice(INT64S)
        return self.rng.choice((0, 1, 2**32 - 1))  # unsigned: none in this proto


# ------------------------------------------------------------------ the run
@dataclass
class Findings:
    bad: list[str] = field(default_factory=list)
    codes: dict[str, dict[str, int]] = field(default_factory=dict)
    calls: int = 0

    def note(self, method: str, code: grpc.StatusCode) -> None:
        per = self.codes.setdefault(method.rsplit("/", 1)[1], {})
        per[code.name] = per.get(code.name, 0) + 1
        self.calls += 1


def _call_unary(
    channel: grpc.Channel, method: str, response: type[Message], data: bytes, findings: Findings
) -> None:
    call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    try:
        answer = call(data, timeout=WAIT)
    except grpc.RpcError as err:
        code = err.code()
        findings.note(method, code)
        if code in FORBIDDEN:
            findings.bad.append(f"{method} {code.name} {err.details()!r} <- {data.hex()}")
        return
    findings.note(method, grpc.StatusCode.OK)
    try:
        response.FromString(answer)
    except DecodeError as exc:
        findings.bad.append(f"{method} OK but not a {response.__name__} ({exc}) <- {data.hex()}")


def _call_watch(channel: grpc.Channel, data: bytes, findings: Findings) -> None:
    method = ML + "Watch"
    call = channel.unary_stream(method, request_serializer=None, response_deserializer=None)
    try:
        for event in call(data, timeout=0.4):
            pb.LineageEvent.FromString(event)
        findings.note(method, grpc.StatusCode.OK)
    except grpc.RpcError as err:
        code = err.code()
        findings.note(method, code)
        if code in FORBIDDEN:
            findings.bad.append(f"{method} {code.name} {err.details()!r} <- {data.hex()}")
    except DecodeError as exc:
        findings.bad.append(f"{method} streamed a non-LineageEvent ({exc}) <- {data.hex()}")


def _mutated(rng: random.Random, encoded: list[bytes]) -> bytes:
    return mutate(rng, rng.choice(encoded), encoded)


def _extreme(extremes: Extremes, request: type[Message]) -> bytes:
    return extremes.message(request.DESCRIPTOR, request).SerializeToString()


def fuzz(address: str, decision_id: str, deadline: float) -> Findings:
    rng = random.Random(SEED)
    findings = Findings()
    extremes = Extremes(rng, decision_id)
    with grpc.insecure_channel(
        address, options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)]
    ) as channel:
        for method, (request, response, seeds) in _seeds(decision_id).items():
            encoded = [s.SerializeToString() for s in seeds]
            scale = SCALE.get(method, 1)
            cases: list[Callable[[], bytes]] = (
                [lambda: random_bytes(rng)] * (RANDOM_CASES // scale)
                + [functools.partial(_mutated, rng, encoded)] * (MUTATED_CASES // scale)
                + [functools.partial(_extreme, extremes, request)] * (EXTREME_CASES // scale)
            )
            for make in cases:
                if time.monotonic() > deadline:
                    findings.bad.append(f"wall-clock cap reached at {method}")
                    return findings
                data = make()
                if len(data) <= MAX_REQUEST:
                    _call_unary(channel, method, response, data, findings)
        watch_seeds = [
            pb.WatchRequest(from_oldest=True).SerializeToString(),
            pb.WatchRequest(cursor="0-1").SerializeToString(),
        ]
        for i in range(WATCH_CASES):
            data = (
                random_bytes(rng)
                if i % 3 == 0
                else mutate(rng, rng.choice(watch_seeds), watch_seeds)
                if i % 3 == 1
                else extremes.message(
                    pb.WatchRequest.DESCRIPTOR, pb.WatchRequest
                ).SerializeToString()
            )
            _call_watch(channel, data, findings)
    return findings


def _sentinel(c: MemLineageClient, memory_id: str) -> tuple[Any, ...]:
    """A read of a fresh memory nothing in the fuzz names, as it is decided."""
    c.record(memory_id, creator="user:sentinel", type="preference")
    d = c.check("read", memory_id)
    return (
        d.effect,
        round(d.compliance_score, 9),
        [r.policy for r in d.reasons],
        [o.kind for o in d.obligations],
        list(d.errors),
        d.policy_version,
    )


# On Redis the requests reach the same servicer through the same runtime: the aio pass
# of scripts/test.sh fuzzes the embedded variant only (`any_runtime`).
@pytest.fixture(params=["embedded", pytest.param("redis", marks=pytest.mark.any_runtime)])
def running(request: pytest.FixtureRequest) -> Iterator[RunningSidecar]:
    store = "embedded"
    if request.param == "redis":
        store = request.getfixturevalue("redis_server").emptied()
    config = Config(policy_dir=BUNDLED_POLICIES, store=store, decision_log="off")
    with RunningSidecar(config, ManualClock(T0)) as sidecar:
        yield sidecar


def test_no_request_is_the_servers_error(
    running: RunningSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    started = time.monotonic()
    with MemLineageClient(running.address, timeout=WAIT) as c:
        c.record("m1", creator="user:alice", type="preference")
        c.record("m2", creator="tool:flight_api", dependencies=["m1"])
        decision_id = c.check("read", "m1").decision_id
        before = _sentinel(c, "sentinel-before")

        findings = fuzz(running.address, decision_id, started + BUDGET_SECONDS)

        assert findings.bad == [], "\n".join(findings.bad[:20])
        # every RPC was reached, and not only by refusals of its bytes
        assert set(findings.codes) == {m.rsplit("/", 1)[1] for m in _seeds("")} | {"Watch"}
        for method in ("Record", "Check", "FilterRank", "Explain", "Feedback"):
            assert findings.codes[method].get("OK", 0) > 0, (method, findings.codes[method])
            assert findings.codes[method].get("INVALID_ARGUMENT", 0) > 0, method
        assert not [
            r for r in caplog.records if r.name == "memlineage.grpc" and r.levelname == "ERROR"
        ]

        # the sidecar still decides as it did: back to its configured policies first
        assert c.reload_policies().applied
        assert c.health() == "SERVING"
        assert _sentinel(c, "sentinel-after") == before
        again = c.check("read", "sentinel-after")  # the remembered request, too
        assert again.effect == before[0]
    assert time.monotonic() - started < BUDGET_SECONDS + 10

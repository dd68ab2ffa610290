"""The gRPC contract end to end: precise errors that leave nothing behind (PRODUCT §8),
the resumable Watch stream, health and reflection, Explain / decision ids / Feedback,
and the JSON decision log. A real sidecar (embedded and Redis) through the client, or
the raw stub where the client cannot express the bad input."""

from __future__ import annotations

import json
import math
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import grpc
import pytest
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from memlineage.client import (
    FailedPrecondition,
    InvalidArgument,
    MemLineageClient,
    MemLineageError,
    NotFound,
    OutOfRange,
    PermissionDenied,
    Unauthenticated,
    WatchStream,
)
from memlineage.config import Config
from memlineage.grpc_api.auth import TokenGrant
from memlineage.lineage.clock import ManualClock
from memlineage.v1 import memlineage_pb2 as pb
from memlineage.v1 import memlineage_pb2_grpc as pb_grpc
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES, RunningSidecar, World

WAIT = 5.0  # the longest any single expected event / answer may take


# ------------------------------------------------------------------ helpers
@contextmanager
def raw_stub(
    world: World,
    token: str | None = "token-alice",
) -> Iterator[tuple[pb_grpc.MemLineageStub, tuple[tuple[str, str], ...]]]:
    """The generated stub on its own channel, with the bearer token as metadata."""
    channel = grpc.insecure_channel(world.sidecar.address)
    try:
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        yield pb_grpc.MemLineageStub(channel), metadata
    finally:
        channel.close()


def rpc_error(fn, *args, **kwargs) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        fn(*args, **kwargs)
    return info.value


def field_error(fn, field: str, *args, **kwargs) -> InvalidArgument:
    """Call through the client; expect INVALID_ARGUMENT whose details begin `field:`."""
    with pytest.raises(InvalidArgument) as info:
        fn(*args, **kwargs)
    err = info.value
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details.startswith(f"{field}:"), err.details
    return err


def assert_not_recorded(world: World, *ids: str) -> None:
    for memory_id in ids:
        with pytest.raises(NotFound):
            world.alice.explain(memory_id)


class Collector:
    """Iterate a WatchStream on a thread; hand events out with bounded waits."""

    def __init__(self, stream: WatchStream) -> None:
        self.stream = stream
        self.events: queue.Queue[pb.LineageEvent] = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for event in self.stream:
                self.events.put(event)
        except BaseException as exc:  # surfaced by take()
            self.error = exc

    def take(self, n: int, timeout: float = WAIT) -> list[pb.LineageEvent]:
        deadline = time.monotonic() + timeout
        out: list[pb.LineageEvent] = []
        while len(out) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"got {len(out)} of {n} events in {timeout} s: "
                    f"{[(e.type, e.memory_id) for e in out]}; "
                    f"stream error: {self.error!r}"
                )
            try:
                out.append(self.events.get(timeout=min(remaining, 0.05)))
            except queue.Empty:
                if self.error is not None and self.events.empty():
                    raise AssertionError(f"the watch ended: {self.error!r}") from None
        return out

    def stop(self) -> None:
        self.stream.cancel()
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "cancel() did not end the watch"


def summary(events: list[pb.LineageEvent]) -> list[tuple[str, str]]:
    return [(e.type, e.memory_id) for e in events]


# ------------------------------------------------------------------ INVALID_ARGUMENT
def test_malformed_ids_are_refused_with_the_field(world: World) -> None:
    c = world.alice
    for bad in ("bad id!", "", "x" * 129, "naïve", "a\nb"):
        field_error(c.record, "memory.id", bad, creator="user:alice")
    # a malformed dependency is named by its index
    c.record("good-1", creator="user:alice")
    field_error(
        c.record,
        "memory.dependencies[1]",
        "derived-1",
        creator="agent:planner",
        dependencies=["good-1", "not valid"],
    )
    assert_not_recorded(world, "derived-1")
    assert list(c.explain("good-1").memory.derivations) == []


def test_malformed_ids_in_every_rpc_name_the_request_field(world: World) -> None:
    """The field in `details` is the one the caller sent, not a store-internal name."""
    c = world.alice
    c.record("ok", creator="user:alice")
    cases = [
        ("memory_id", lambda: c.check("read", "bad id")),
        ("memory_ids[1]", lambda: c.check("act", ["ok", "bad id"], action="book")),
        ("candidates[1].memory_id", lambda: c.filter_rank([("ok", 0.5), ("bad id", 0.4)])),
        ("memory_id", lambda: c.explain("bad id")),
        ("memory_id", lambda: c.revoke("bad id")),
        ("successor_id", lambda: c.supersede("ok", "bad id")),
        ("memory_ids[0]", lambda: c.feedback("", ["bad id"], True)),
        ("reason", lambda: c.revoke("ok", reason="x" * 300)),
    ]
    wrong = []
    for field, call in cases:
        with pytest.raises(InvalidArgument) as info:
            call()
        if not info.value.details.startswith(f"{field}:"):
            wrong.append((field, info.value.details))
    assert wrong == [], "details name a field the request does not have"
    m = c.explain("ok").memory
    assert (m.status, m.version, m.access_count) == (pb.STATUS_ACTIVE, 1, 0)


def test_unset_and_unknown_operations(world: World) -> None:
    world.alice.record("op-target", creator="user:alice")
    with raw_stub(world) as (stub, md):
        for op in (pb.OPERATION_UNSPECIFIED, 42):
            err = rpc_error(
                stub.Check,
                pb.CheckRequest(operation=op, memory_id="op-target"),
                metadata=md,
                timeout=WAIT,
            )
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert err.details().startswith("operation:"), err.details()
        # a status action that is unset is refused as well, and changes nothing
        err = rpc_error(
            stub.UpdateStatus,
            pb.UpdateStatusRequest(memory_id="op-target"),
            metadata=md,
            timeout=WAIT,
        )
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.details().startswith("action:"), err.details()
        # a Record without a memory
        err = rpc_error(stub.Record, pb.RecordRequest(), metadata=md, timeout=WAIT)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.details().startswith("memory:"), err.details()
    m = world.alice.explain("op-target").memory
    assert (m.status, m.version) == (pb.STATUS_ACTIVE, 1)


def test_nan_and_out_of_range_confidence(world: World) -> None:
    c = world.alice
    for i, bad in enumerate((math.nan, 1.5, -0.01, math.inf)):
        field_error(
            c.record,
            "memory.creator_confidence",
            f"conf-{i}",
            creator="reasoning:planner",
            confidence=bad,
        )
    assert_not_recorded(world, "conf-0", "conf-1", "conf-2", "conf-3")
    # the edges of the range are fine
    assert c.record("conf-ok-0", creator="reasoning:planner", confidence=0.0).recorded
    assert c.record("conf-ok-1", creator="reasoning:planner", confidence=1.0).recorded


def test_timestamps_far_in_the_future(world: World) -> None:
    c = world.alice
    day = 86_400.0
    field_error(
        c.record, "memory.created_at", "future-1", creator="user:alice", created_at=world.now + day
    )
    assert_not_recorded(world, "future-1")
    # a little clock skew is tolerated (the limit is 300 s)
    assert c.record("skewed", creator="user:alice", created_at=world.now + 60).recorded

    # the decision time of every decision RPC
    field_error(c.check, "time", "read", "skewed", at=world.now + day)
    field_error(c.record, "time", "future-2", creator="user:alice", at=world.now + day)
    assert_not_recorded(world, "future-2")
    field_error(c.filter_rank, "time", [("skewed", 0.5)], at=world.now + day)
    field_error(c.revoke, "time", "skewed", at=world.now + day)
    assert c.explain("skewed").memory.status == pb.STATUS_ACTIVE


def test_negative_and_nan_budgets(world: World) -> None:
    c = world.alice
    c.record("priced", creator="tool:flight_api", tags=["flight_price"])
    for bad in (-0.01, math.nan):
        field_error(c.check, "budget", "read", "priced", budget=bad)
        field_error(c.filter_rank, "budget", [("priced", 0.5)], budget=bad)
        field_error(c.record, "budget", "budgeted", creator="user:alice", budget=bad)
    assert_not_recorded(world, "budgeted")
    assert c.check("read", "priced", budget=0.0).effect != pb.EFFECT_UNSPECIFIED


def test_thousands_of_dependencies(world: World) -> None:
    c = world.alice
    c.record("base", creator="user:alice")
    deps = ["base", *(f"dep-{i}" for i in range(2999))]
    err = field_error(
        c.record, "memory.dependencies", "too-many", creator="agent:planner", dependencies=deps
    )
    assert "256" in err.details
    assert_not_recorded(world, "too-many")
    assert list(c.explain("base").memory.derivations) == []
    # exactly at the limit is accepted
    for i in range(255):
        c.record(f"p-{i}", creator="user:alice")
    at_limit = ["base", *(f"p-{i}" for i in range(255))]
    assert c.record("wide", creator="agent:planner", dependencies=at_limit).recorded
    assert len(c.explain("wide", ancestor_depth=1).memory.dependencies) == 256


def test_unknown_dependency_among_three_records_nothing(world: World) -> None:
    c = world.alice
    c.record("city", creator="user:alice", claim=("user:alice", "destination_city", "Rome"))
    c.record("dates", creator="user:alice")
    err = field_error(
        c.record,
        "memory.dependencies[1]",
        "plan",
        creator="agent:planner",
        dependencies=["city", "ghost", "dates"],
    )
    assert "ghost" in err.details
    assert_not_recorded(world, "plan")
    for real in ("city", "dates"):
        ex = c.explain(real)
        assert list(ex.memory.derivations) == []
        assert list(ex.descendants) == []
        assert (ex.memory.status, ex.memory.version) == (pb.STATUS_ACTIVE, 1)
    # the same id can be recorded properly afterwards: nothing was reserved
    ok = c.record("plan", creator="agent:planner", dependencies=["city", "dates"])
    assert ok.recorded
    assert list(c.explain("city").memory.derivations) == ["plan"]
    # the event log never saw the refused record
    watch = Collector(c.watch(from_oldest=True))
    try:
        assert summary(watch.take(3)) == [
            ("recorded", "city"),
            ("recorded", "dates"),
            ("recorded", "plan"),
        ]
    finally:
        watch.stop()


def test_dependency_in_another_namespace_is_unknown_here(world: World) -> None:
    world.bob.record("bob-secret", creator="user:bob")
    err = field_error(
        world.alice.record,
        "memory.dependencies[0]",
        "steal",
        creator="agent:planner",
        dependencies=["bob-secret"],
    )
    assert "user-b" not in err.details  # never reveals where it lives
    assert_not_recorded(world, "steal")
    assert list(world.bob.explain("bob-secret").memory.derivations) == []


def test_self_dependency_and_duplicate_dependency(world: World) -> None:
    c = world.alice
    c.record("root", creator="user:alice")
    field_error(
        c.record,
        "memory.dependencies[1]",
        "loop",
        creator="agent:planner",
        dependencies=["root", "loop"],
    )
    assert_not_recorded(world, "loop")
    field_error(
        c.record,
        "memory.dependencies[1]",
        "twice",
        creator="agent:planner",
        dependencies=["root", "root"],
    )
    assert_not_recorded(world, "twice")
    assert list(c.explain("root").memory.derivations) == []


def test_nan_similarity_in_filter_rank(world: World) -> None:
    c = world.alice
    c.record("cand", creator="user:alice")
    field_error(c.filter_rank, "candidates[0].similarity", [("cand", math.nan)])
    field_error(c.filter_rank, "candidates[1].similarity", [("cand", 0.5), ("cand", math.inf)])
    # a negative similarity would rise with every penalty the rank multiplies it by
    field_error(c.filter_rank, "candidates[1].similarity", [("cand", 0.5), ("cand", -0.25)])
    field_error(c.filter_rank, "candidates[1].memory_id", [("cand", 0.5), ("", 0.4)])
    field_error(c.filter_rank, "limit", [("cand", 0.5)], limit=-1)
    # a refused batch is not a read: no access was counted
    assert c.explain("cand").memory.access_count == 0


def test_oversized_message_is_resource_exhausted(world: World) -> None:
    tags = [f"{i:08d}" + "t" * 52 for i in range(80_000)]  # ~5 MiB > 4 MiB
    request = pb.RecordRequest(
        memory=pb.Memory(
            id="huge", creator=pb.Creator(kind=pb.CREATOR_KIND_USER, id="user:alice"), tags=tags
        )
    )
    assert request.ByteSize() > 4 * 1024 * 1024
    with raw_stub(world) as (stub, md):
        err = rpc_error(stub.Record, request, metadata=md, timeout=WAIT)
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert_not_recorded(world, "huge")
    # over the tag limit but under the message size: a field-level refusal
    field_error(
        world.alice.record,
        "memory.tags",
        "many-tags",
        creator="user:alice",
        tags=[f"t{i}" for i in range(65)],
    )
    assert_not_recorded(world, "many-tags")
    assert world.alice.record("after", creator="user:alice").recorded


# ------------------------------------------------------------------ NOT_FOUND
def test_unknown_ids_are_not_found(world: World) -> None:
    c = world.alice
    for call in (c.explain, c.revoke, c.confirm):
        with pytest.raises(NotFound):
            call("nobody-recorded-this")
    c.record("old", creator="user:alice")
    with pytest.raises(NotFound):
        c.supersede("old", "no-successor")
    assert c.explain("old").memory.status == pb.STATUS_ACTIVE
    # another tenant's memory is not found here either (Explain never crosses namespaces)
    with pytest.raises(NotFound):
        world.bob.explain("old")
    with pytest.raises(NotFound):
        world.bob.revoke("old")
    assert c.explain("old").memory.status == pb.STATUS_ACTIVE


# ------------------------------------------------------------------ FAILED_PRECONDITION
def test_stale_version_and_forbidden_transitions(world: World) -> None:
    c = world.alice
    c.record("fact", creator="user:alice")
    with pytest.raises(FailedPrecondition):
        c.revoke("fact", reason="stale", expected_version=7)
    m = c.explain("fact").memory
    assert (m.status, m.version) == (pb.STATUS_ACTIVE, 1)
    # confirm is only from pending_verification
    with pytest.raises(FailedPrecondition):
        c.confirm("fact")
    done = c.revoke("fact", reason="wrong", expected_version=1)
    assert done.applied and done.memory.version == 2
    # revoked -> only evicted: revoke again, confirm and supersede are all refused
    with pytest.raises(FailedPrecondition):
        c.revoke("fact")
    with pytest.raises(FailedPrecondition):
        c.confirm("fact")
    c.record("fact-2", creator="user:alice")
    with pytest.raises(FailedPrecondition):
        c.supersede("fact", "fact-2")
    m = c.explain("fact").memory
    assert (m.status, m.version) == (pb.STATUS_REVOKED, 2)
    assert [h.to_status for h in m.history] == [pb.STATUS_REVOKED]


# ------------------------------------------------------------------ PERMISSION_DENIED
def test_other_tenants_namespace_is_denied(world: World) -> None:
    world.alice.record("mine", creator="user:alice")
    bob_as_alice = MemLineageClient(
        world.sidecar.address, token="token-bob", namespace="user-a", timeout=WAIT, retries=0
    )
    try:
        calls = [
            lambda: bob_as_alice.check("read", "mine"),
            lambda: bob_as_alice.explain("mine"),
            lambda: bob_as_alice.revoke("mine"),
            lambda: bob_as_alice.feedback("", ["mine"], False),
            lambda: bob_as_alice.filter_rank([("mine", 0.9)]),
            lambda: bob_as_alice.record("planted", creator="tool:web_search"),
        ]
        for call in calls:
            with pytest.raises(PermissionDenied) as info:
                call()
            assert info.value.details.startswith("namespace:"), info.value.details
            assert "user-a" in info.value.details
        with pytest.raises(PermissionDenied):
            next(bob_as_alice.watch(from_oldest=True))
    finally:
        bob_as_alice.close()
    assert world.alice.explain("mine").memory.status == pb.STATUS_ACTIVE
    assert_not_recorded(world, "planted")


def test_admin_rpcs_need_an_admin_token(world: World) -> None:
    for c in (world.alice, world.bob):
        with pytest.raises(PermissionDenied):
            c.list_policies()
        with pytest.raises(PermissionDenied):
            c.lint_policy({"p.mlp": "policy p { on read when true deny }"})
        with pytest.raises(PermissionDenied):
            c.reload_policies()
    listed = world.admin.list_policies()
    assert {p.name for p in listed.policies} >= {"user_statements_protected", "revoked_not_used"}
    # the admin token has no namespace of its own
    with pytest.raises(PermissionDenied):
        world.admin.check("read", "anything")


# ------------------------------------------------------------------ UNAUTHENTICATED
def test_missing_or_wrong_token_is_unauthenticated(world: World) -> None:
    for token in (None, "token-mallory", "token-alic"):
        client = MemLineageClient(world.sidecar.address, token=token, timeout=WAIT, retries=0)
        try:
            with pytest.raises(Unauthenticated):
                client.record("sneaky", creator="user:alice")
            with pytest.raises(Unauthenticated):
                client.check("read", "sneaky")
            with pytest.raises(Unauthenticated):
                client.list_policies()
            with pytest.raises(Unauthenticated):
                next(client.watch(from_oldest=True))
            # health is for load balancers: no token needed
            assert client.health() == "SERVING"
        finally:
            client.close()
    with raw_stub(world, token=None) as (stub, _):
        err = rpc_error(
            stub.Check,
            pb.CheckRequest(operation=pb.OPERATION_READ, memory_id="x"),
            metadata=(("authorization", "Basic token-alice"),),
            timeout=WAIT,
        )
        assert err.code() == grpc.StatusCode.UNAUTHENTICATED
    assert_not_recorded(world, "sneaky")


# ------------------------------------------------------------------ watch cursors
def _ahead_of(cursor: str) -> str:
    """A well-formed cursor of the same backend, past the end of the log."""
    if "-" in cursor:  # Redis stream id
        ms, _, _ = cursor.partition("-")
        return f"{int(ms) + 10**9}-0"
    return str(int(cursor) + 1000)


def test_bad_watch_cursors(world: World) -> None:
    c = world.alice
    c.record("w1", creator="user:alice")
    with c.watch(from_oldest=True) as stream:
        first = next(stream)
    assert (first.type, first.memory_id) == ("recorded", "w1")

    for garbage in ("not-a-cursor", "12abc", "-1", "9" * 40):
        with pytest.raises(InvalidArgument) as info:
            next(c.watch(cursor=garbage))
        assert info.value.details.startswith("cursor:"), (garbage, info.value.details)

    with pytest.raises(OutOfRange) as info:
        next(c.watch(cursor=_ahead_of(first.cursor)))
    assert info.value.details.startswith("cursor:"), info.value.details


# ------------------------------------------------------------------ Watch
def test_watch_tells_the_owner_of_a_derived_memory_about_a_correction(world: World) -> None:
    c = world.alice
    quick = MemLineageClient(world.sidecar.address, token="token-alice", timeout=2, retries=0)
    watch = Collector(c.watch(from_oldest=True))
    try:
        # the watch is open and blocked waiting: other RPCs keep answering
        started = time.monotonic()
        d = quick.check("read", "nothing-yet")
        assert d.effect == pb.EFFECT_DEGRADE and time.monotonic() - started < 2

        c.record(
            "city-1", creator="user:alice", claim=("user:alice", "destination_city", "Shanghai")
        )
        c.record("hotel-1", creator="agent:planner", dependencies=["city-1"])
        fix = c.record(
            "city-2", creator="user:alice", claim=("user:alice", "destination_city", "Beijing")
        )
        assert fix.superseded_id == "city-1" and list(fix.affected_ids) == ["hotel-1"]

        events = watch.take(5)
        assert summary(events) == [
            ("recorded", "city-1"),
            ("recorded", "hotel-1"),
            ("recorded", "city-2"),
            ("status_changed", "city-1"),
            ("cascaded", "city-1"),
        ]
        rec_hotel, changed, cascaded = events[1], events[3], events[4]
        assert list(rec_hotel.affected_ids) == ["city-1"]
        assert changed.status == pb.STATUS_SUPERSEDED
        assert changed.previous_status == pb.STATUS_ACTIVE
        assert changed.successor == "city-2"
        assert "hotel-1" in cascaded.affected_ids
        assert cascaded.root_id == "city-1"
        cursors = [e.cursor for e in events]
        assert all(cursors) and len(set(cursors)) == 5

        # still answering while the watch waits again
        assert quick.check("read", "hotel-1").effect == pb.EFFECT_DEGRADE
    finally:
        watch.stop()
        quick.close()

    # resume after the 2nd event: exactly the later ones, then what comes next
    resumed = Collector(c.watch(cursor=events[1].cursor))
    try:
        later = resumed.take(3)
        assert [e.cursor for e in later] == cursors[2:]
        assert summary(later) == summary(events[2:])
        c.record("marker", creator="user:alice")
        assert summary(resumed.take(1)) == [("recorded", "marker")]
    finally:
        resumed.stop()
    assert resumed.error is None


def test_watch_from_now_skips_the_past_and_stays_in_its_namespace(world: World) -> None:
    c = world.alice
    c.record("before", creator="user:alice")
    watch = Collector(c.watch())
    try:
        # the stream is opened lazily: probe until it is certainly live
        probe = 0
        deadline = time.monotonic() + WAIT
        first: list[pb.LineageEvent] = []
        while not first:
            assert time.monotonic() < deadline, "the watch never delivered"
            c.record(f"probe-{probe}", creator="user:alice")
            probe += 1
            with suppress(queue.Empty):
                first = [watch.events.get(timeout=0.2)]
        assert first[0].memory_id.startswith("probe-")
        world.bob.record("bob-private", creator="user:bob")
        c.record("after", creator="user:alice")
        seen = [first[0].memory_id]
        while seen[-1] != "after":
            seen.append(watch.take(1)[0].memory_id)
        assert "before" not in seen and "bob-private" not in seen
    finally:
        watch.stop()


# ------------------------------------------------------------------ health, reflection
class _Bearer(grpc.StreamStreamClientInterceptor):
    """Adds the token to a stream's metadata (reflection's client takes a channel)."""

    def __init__(self, token: str) -> None:
        self.header = ("authorization", f"Bearer {token}")

    def intercept_stream_stream(self, continuation, details, requests):  # type: ignore[no-untyped-def]
        metadata = [*(details.metadata or ()), self.header]
        return continuation(details._replace(metadata=metadata), requests)


def test_health_and_reflection(world: World) -> None:
    assert world.alice.health() == "SERVING"
    assert world.alice.health("memlineage.v1.MemLineage") == "SERVING"
    assert world.alice.health("memlineage.v1.PolicyAdmin") == "SERVING"
    with pytest.raises(NotFound) as missing:
        world.alice.health("no.such.Service")
    # says which service it does not know and which it does (before: no message)
    assert missing.value.details.startswith("service: 'no.such.Service' is not served here")
    assert "'memlineage.v1.MemLineage'" in missing.value.details

    # With tokens configured, reflection is served to callers with one: a stream that
    # waits for its first message must not be open to anyone (it holds a worker).
    channel = grpc.insecure_channel(world.sidecar.address)
    try:
        with pytest.raises(grpc.RpcError) as err:
            ProtoReflectionDescriptorDatabase(channel).get_services()
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        channel.close()
    channel = grpc.intercept_channel(
        grpc.insecure_channel(world.sidecar.address), _Bearer("token-alice")
    )
    try:
        db = ProtoReflectionDescriptorDatabase(channel)
        services = set(db.get_services())
        assert {
            "memlineage.v1.MemLineage",
            "memlineage.v1.PolicyAdmin",
            "grpc.health.v1.Health",
        } <= services
        # the descriptors are served too: a client can build requests from them
        check = db.FindFileContainingSymbol("memlineage.v1.MemLineage")
        assert check.package == "memlineage.v1"
        assert {m.name for m in check.service[0].method} >= {
            "Record",
            "Check",
            "FilterRank",
            "UpdateStatus",
            "Feedback",
            "Explain",
            "Watch",
        }
    finally:
        channel.close()


# ------------------------------------------------------------------ explain, feedback
def test_decision_ids_explain_and_feedback(world: World) -> None:
    c = world.alice
    rec = c.record("pref", creator="user:alice", type="preference")
    d = c.check("read", "pref")
    assert d.decision_id and d.decision_id != rec.decision.decision_id
    ex = c.explain("pref")
    ids = [x.decision_id for x in ex.decisions]
    assert ids[:2] == [d.decision_id, rec.decision.decision_id]  # newest first
    assert ex.decisions[0].operation == pb.OPERATION_READ
    assert ex.decisions[1].operation == pb.OPERATION_WRITE
    assert list(ex.decisions[0].memory_ids) == ["pref"]

    # feedback by decision id: the memories come from the decision
    assert c.feedback(d.decision_id, [], True).updated == 1
    assert c.feedback(d.decision_id, ["pref"], False).updated == 1

    # Bob cannot report on Alice's decision, with or without naming her memory, and
    # cannot tell it from an id never issued (before: NOT_FOUND for hers, OK for the
    # other: an oracle of which decision ids another namespace holds)
    never = d.decision_id[:-1] + ("0" if d.decision_id[-1] != "0" else "1")
    for decision_id in (d.decision_id, never):
        with pytest.raises(NotFound) as info:
            world.bob.feedback(decision_id, [], True)
        assert info.value.details == (
            f"decision_id: no decision {decision_id!r} in this namespace, and no "
            "memory_ids to report on"
        )
        assert world.bob.feedback(decision_id, ["pref"], True).updated == 0
    assert c.explain("pref").memory.uses_ok == 1  # Alice's memory: Bob changed nothing
    # Bob's view of Alice's memory: no decisions of hers leak through Explain
    with pytest.raises(NotFound):
        world.bob.explain("pref")


def test_explain_shows_lineage_up_and_down(world: World) -> None:
    c = world.alice
    c.record("a", creator="user:alice")
    c.record("b", creator="agent:planner", dependencies=["a"])
    c.record("c", creator="agent:planner", dependencies=["b"])
    ex = c.explain("b")
    assert [m.id for m in ex.ancestors] == ["a"]
    assert [m.id for m in ex.descendants] == ["c"]
    assert {(e.from_id, e.to_id) for e in ex.edges} == {("a", "b"), ("b", "c")}
    with pytest.raises(InvalidArgument) as info:
        c.explain("b", ancestor_depth=-1)
    assert info.value.details.startswith("ancestor_depth:")


def test_refused_requests_leave_no_decision_on_the_memory(world: World) -> None:
    """A request that fails (ALREADY_EXISTS, FAILED_PRECONDITION) changed nothing, so
    Explain must not show a decision for it: it would claim a write that never was."""
    c = world.alice
    rec = c.record("ok", creator="user:alice")
    read = c.check("read", "ok")
    with pytest.raises(MemLineageError) as dup:
        c.record("ok", creator="tool:web_search")
    assert dup.value.code == grpc.StatusCode.ALREADY_EXISTS
    with pytest.raises(FailedPrecondition):
        c.revoke("ok", expected_version=5)
    with pytest.raises(FailedPrecondition):
        c.confirm("ok")
    ex = c.explain("ok")
    assert (ex.memory.creator.id, ex.memory.version) == ("user:alice", 1)
    assert [(d.decision_id, d.operation) for d in ex.decisions] == [
        (read.decision_id, pb.OPERATION_READ),
        (rec.decision.decision_id, pb.OPERATION_WRITE),
    ]


# ------------------------------------------------------------------ decision log
def test_decision_log_has_one_json_line_per_decision(tmp_path: Path) -> None:
    log_path = tmp_path / "decisions.jsonl"
    config = Config(
        policy_dir=BUNDLED_POLICIES,
        decision_log=str(log_path),
        tokens=(TokenGrant("tok", ("ns-log",), name="t"),),
    )
    issued: list[tuple[str, str, str]] = []  # (decision_id, op, effect)
    effect = {pb.EFFECT_ALLOW: "allow", pb.EFFECT_DENY: "deny", pb.EFFECT_DEGRADE: "degrade"}

    def note(d: pb.Decision, op: str) -> None:
        issued.append((d.decision_id, op, effect[d.effect]))

    with (
        RunningSidecar(config, ManualClock(T0)) as s,
        MemLineageClient(s.address, token="tok", timeout=WAIT) as c,
    ):
        note(c.record("pref", creator="user:alice").decision, "write")
        note(c.record("plan", creator="agent:planner", dependencies=["pref"]).decision, "derive")
        note(c.check("read", "pref"), "read")
        note(c.check("act", ["plan", "pref"], action="book"), "act")
        ranked = c.filter_rank([("pref", 0.9), ("legacy", 0.5)])
        for cand in ranked.candidates:
            note(cand.decision, "read")
        note(c.revoke("pref", actor="tool:web_search").decision, "update")
        note(
            c.record(
                "guess", creator="tool:web_search", claim=("user:alice", "seat", "aisle")
            ).decision,
            "write",
        )
        clean = len(issued)
        # refused requests: no decision was taken, so none may be logged
        refused = [
            lambda: c.record("bad-conf", creator="user:alice", confidence=math.nan),
            lambda: c.record("bad-dep", creator="agent:planner", dependencies=["pref", "ghost"]),
            lambda: c.record("self", creator="agent:planner", dependencies=["self"]),
            # a different memory under an existing id (an identical one is a replay)
            lambda: c.record("pref", creator="user:alice", confidence=0.5),
            lambda: c.revoke("plan", expected_version=9),
        ]
        for call in refused:
            with pytest.raises(MemLineageError):
                call()

    lines = log_path.read_text(encoding="utf-8").splitlines()
    logged = [json.loads(line) for line in lines]
    assert [(e["decision_id"], e["op"], e["effect"]) for e in logged[:clean]] == issued
    assert [(e["op"], e["memory_ids"]) for e in logged[clean:]] == [], (
        "refused requests were logged as decisions"
    )
    for entry in logged:
        assert entry["namespace"] == "ns-log"
        assert isinstance(entry["policies"], list)
    by_id = {e["decision_id"]: e for e in logged}
    revoke = by_id[issued[6][0]]
    assert revoke["effect"] == "deny"
    assert "user_statements_protected" in revoke["policies"]
    legacy = by_id[issued[5][0]]
    assert legacy["memory_ids"] == ["legacy"]
    assert "unknown_provenance_read" in legacy["policies"]

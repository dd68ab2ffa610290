"""The MemLineage and PolicyAdmin servicers: authenticate, convert, call, map errors.

They run on the gRPC server's worker threads (the synchronous server: in this
Python its per-call cost is well below grpc.aio's, see bench/README.md), so the
engine and the store are called directly; Watch streams run on a pool of their
own, so long-lived streams never hold the threads unary calls need.

Every request arrives as its bytes (see `register`) and is parsed here, so bytes
that are no such message are the caller's error: INVALID_ARGUMENT naming
`request`. Every input a request carries is checked against the request's own
field names (`memory_ids`, `candidates[3].memory_id`, `time.nanos`) before the
engine or the store sees it; what the domain refuses maps to the status its
error names (`lineage/errors.py`). Anything else that goes wrong is a bug: it is
logged with its traceback and answered INTERNAL, never UNKNOWN."""

from __future__ import annotations

import contextvars
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeAlias, TypeVar

import grpc
from google.protobuf.message import Message
from memlineage_dsl.facts import Creator

from memlineage.engine.core import Engine
from memlineage.engine.outcomes import RecordResult, StatusResult
from memlineage.grpc_api import registration, serde, wire
from memlineage.grpc_api.auth import ACTING_IN, LOCAL, Authenticator, Principal
from memlineage.grpc_api.call_pool import CallPool
from memlineage.grpc_api.check_memo import CheckMemo, Remembered
from memlineage.lineage.errors import LineageError, StoreUnavailableError, ValidationError
from memlineage.lineage.validation import check_id
from memlineage.metrics import Metrics
from memlineage.v1 import memlineage_pb2 as pb
from memlineage.v1 import memlineage_pb2_grpc as pb_grpc

log = logging.getLogger("memlineage.grpc")
Ctx: TypeAlias = grpc.ServicerContext
_Written = TypeVar("_Written", pb.RecordResponse, pb.UpdateStatusResponse)


# An error's details are kept short: they travel in the trailers (a client refuses
# trailers past its metadata limit, 8 KiB by default) and may quote the input.
MAX_DETAILS = 1000
# Longest `action` a Check may name (a tool or action name, as the policies see it).
MAX_ACTION_LENGTH = 256
# Check requests longer than this are decided but not remembered by their bytes:
# an ordinary one is a few hundred bytes, and the memo should not hold megabytes.
MEMO_MAX_REQUEST_BYTES = 4096


def _padded(request: pb.CheckRequest, data: bytes) -> bool:
    """Whether `data` holds bytes its parsed `request` does not account for: unknown
    fields (dropped here, as the parse ignores them) or a field sent twice."""
    request.DiscardUnknownFields()
    return len(data) != request.ByteSize()


# UpdateStatus: the engine's and store's field names as the request names them.
_UPDATE_FIELDS = {"successor": "successor_id", "status": "action", "id": "memory_id"}


def status_of(err: LineageError) -> grpc.StatusCode:
    return getattr(grpc.StatusCode, err.grpc_status, grpc.StatusCode.INTERNAL)


def details_of(err: LineageError) -> str:
    text = f"{err.field}: {err.message}" if err.field else err.message
    return text if len(text) <= MAX_DETAILS else text[: MAX_DETAILS - 1] + "…"


ERROR_CODE_KEY = "memlineage-error-code"
ERROR_FIELD_KEY = "memlineage-error-field"
"""Trailing metadata of a refusal: the error's stable `code` and the field to blame (the
client's `MemLineageError.reason` and `.field`), branched on instead of `details`."""


def abort_with(err: LineageError, context: grpc.ServicerContext) -> None:
    """End the call with `err`'s status, its details, and its code and field as trailing
    metadata (ASCII: a field quoting a caller's non-ASCII key is escaped). Raises."""
    trailers = [(ERROR_CODE_KEY, err.code)]
    if err.field:
        trailers.append((ERROR_FIELD_KEY, _ascii(err.field[:MAX_DETAILS])))
    context.set_trailing_metadata(tuple(trailers))
    context.abort(status_of(err), details_of(err))


def _ascii(text: str) -> str:
    return text if text.isascii() and text.isprintable() else ascii(text)[1:-1]


def loggable(text: str, limit: int = 200) -> str:
    """Caller-supplied text for one log line: control characters escaped, bounded."""
    text = text if len(text) <= limit else text[:limit] + "…"
    return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text


class TooManyStreams(LineageError):
    """A caller already holds its share of the Watch pool: RESOURCE_EXHAUSTED."""

    code = "TOO_MANY_STREAMS"
    grpc_status = "RESOURCE_EXHAUSTED"


# Watch streams one caller (a token; every caller without tokens) may hold at once: the
# pool has 256 threads, and one tenant's idle streams must not take all of them.
WATCH_STREAMS_PER_CALLER = 64


class ShuttingDown(LineageError):
    """A Watch stream ends when the sidecar stops: its client resumes elsewhere."""

    code = "SHUTTING_DOWN"
    grpc_status = "UNAVAILABLE"


class ServiceBase:
    """Auth and error mapping."""

    def __init__(self, engine: Engine, auth: Authenticator, metrics: Metrics) -> None:
        self.engine = engine
        self.auth = auth
        self.metrics = metrics

    def principal(self, context: grpc.ServicerContext) -> Principal:
        if not self.auth.enabled:
            return LOCAL
        metadata = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        return self.auth.principal(metadata)

    def acting(
        self, principal: Principal, msg: pb.Actor, ns: str, default: Creator | None = None
    ) -> Creator:
        """The request's actor (unset: `default`, else the namespace's user), if the
        caller may speak as it (`Authenticator.speaks`)."""
        who = serde.actor(msg, default if default is not None else self.default_actor(ns))
        if not principal.speaks_as:
            return who
        unset = msg.kind == pb.CREATOR_KIND_UNSPECIFIED and not msg.id and default is None
        return self.auth.speaks(principal, who, "actor", unset=unset)

    def default_actor(self, ns: str) -> Creator:
        # Creators are frozen: one per namespace, bounded.
        cache: dict[str, Creator] = self.__dict__.setdefault("_default_actors", {})
        hit = cache.get(ns)
        if hit is None:
            if len(cache) >= 10_000:
                cache.clear()
            hit = cache[ns] = Creator("user", f"user:{ns}")
        return hit


def _internal(name: str, context: grpc.ServicerContext, metrics: Metrics) -> None:
    """A bug, not the caller's error: the traceback to the log, INTERNAL (short) to
    the caller; never grpc's UNKNOWN with the exception's text."""
    log.exception("%s failed on an unexpected error", name)
    metrics.rpc_errors.labels(name, "INTERNAL").inc()
    context.abort(
        grpc.StatusCode.INTERNAL, f"internal error in {name}; the sidecar's log has the details"
    )  # raises


_CALLER: contextvars.ContextVar[str | None] = contextvars.ContextVar("caller", default=None)


def current_caller() -> str | None:
    """The authenticated caller of the RPC running on this thread (its principal's
    name), None outside one: what the decision log writes as `requested_by`."""
    return _CALLER.get()


def rpc(
    request_class: type[Message], *, raw: bool = False, admin: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Wrap a unary handler: principal in, the request parsed from its bytes as a
    `request_class` (`raw`: handed over as the bytes), domain errors out as gRPC
    statuses, anything unexpected as INTERNAL (and logged). `admin`: the caller's
    admin right checked before the bytes are parsed (a caller without it learns
    nothing of the admin RPC's request format: PERMISSION_DENIED, not INVALID_ARGUMENT)."""

    def decorate(method: Callable[..., Any]) -> Callable[..., Any]:
        name = method.__name__

        @functools.wraps(method)
        def wrapper(self: ServiceBase, request: Any, context: grpc.ServicerContext) -> Any:
            started = time.perf_counter()
            try:
                principal = self.principal(context)
                _CALLER.set(principal.name)
                if admin:
                    self.auth.require_admin(principal, context.peer() or "")
                if type(request) is bytes:  # as `register` registers it
                    if not raw:
                        request = serde.parse(request_class, request)
                elif raw:  # a message, from a server registered the generated way
                    request = request.SerializeToString()
                return method(self, request, context, principal)
            except LineageError as err:
                if isinstance(err, StoreUnavailableError):
                    self.metrics.store_errors.labels(name).inc()
                self.metrics.rpc_errors.labels(name, status_of(err).name).inc()
                abort_with(err, context)  # raises
            except Exception:
                _internal(name, context, self.metrics)  # raises
            finally:
                _CALLER.set(None)  # the worker thread serves other callers next
                self.metrics.observe_latency(name, time.perf_counter() - started)

        return wrapper

    return decorate


class MemLineageService(ServiceBase, pb_grpc.MemLineageServicer):
    # A watcher blocks in the store for up to WATCH_POLL seconds at a time, on a
    # thread of `watch_pool` (see `register`).
    WATCH_POLL = 0.5
    # Threads of open Watch streams; grown (up to twice as many) for Watch calls that
    # never send their request, which would hold them before any per-caller count.
    WATCH_THREADS = 256

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.watch_pool = CallPool(
            self.WATCH_THREADS, most=2 * self.WATCH_THREADS, name="memlineage-watch"
        )
        self._watching: dict[str, int] = {}  # open Watch streams per caller
        self._watching_lock = threading.Lock()
        self.check_memo = CheckMemo()
        # Set on shutdown: open Watch streams end at once with UNAVAILABLE (clients
        # resume from their cursor elsewhere) instead of holding the grace period.
        self.stopping = threading.Event()

    def close(self) -> None:
        self.watch_pool.shutdown(wait=False, cancel_futures=True)

    @rpc(pb.CheckRequest, raw=True)
    def Check(self, request: bytes, context: Ctx, principal: Principal) -> bytes:
        # Arrives encoded and leaves encoded (see `register`). A request seen before
        # (same bytes, same caller namespaces) whose decision still holds is issued
        # again from its ticket; anything else is parsed and decided.
        key = (principal.scope, request)
        known = self.check_memo.get(key)
        down: StoreUnavailableError | None = None
        if known is not None:
            try:
                issued = self.engine.reissue(known.ticket)
            except StoreUnavailableError as exc:  # decided under the fail mode, not asked again
                issued, down = None, exc
            if issued is not None:
                ACTING_IN.set(known.ticket.context.namespace)
                self.metrics.count_again(known.tallies)
                return known.answer.encode(*issued)
        return self._check(serde.parse(pb.CheckRequest, request), principal, key, down)

    def _check(
        self,
        request: pb.CheckRequest,
        principal: Principal,
        key: tuple[object, bytes],
        store_down: StoreUnavailableError | None = None,
    ) -> bytes:
        ns = self.auth.namespace(principal, request.namespace)
        op = serde.operation(request.operation)
        if op == "act":  # never reused: an act may spend grants and moves counters
            rec = self.engine.act(
                ns,
                serde.text(request.action, "action", MAX_ACTION_LENGTH),
                serde.ids(request.memory_ids, "memory_ids"),
                serde.arguments(request.arguments),
                self.acting(principal, request.actor, ns),
                serde.budget(request),
                serde.from_ts(request, "time"),
            )
            self.metrics.count(op, (rec.decision,))
            return wire.check_response_bytes(rec)
        if request.arguments:
            raise ValidationError("only act takes arguments", field="arguments")
        if request.memory_ids:  # before: ignored, the decision taken on memory_id alone
            raise ValidationError(
                f"only act names several memories; {op} names its one in memory_id",
                field="memory_ids",
            )
        ids = [check_id(request.memory_id, "memory_id")]
        args = (
            ns,
            op,
            ids,
            self.acting(principal, request.actor, ns),
            serde.budget(request),
            serde.text(request.action, "action", MAX_ACTION_LENGTH),
            request.historical,
            serde.from_ts(request, "time"),
        )
        rec, ticket = self.engine.check_ticketed(*args, unanswered=store_down)
        self.metrics.count(op, (rec.decision,))
        if (
            ticket is None
            or request.HasField("time")  # a stated time: not "now" again
            or len(key[1]) > MEMO_MAX_REQUEST_BYTES
            # bytes the message does not account for (unknown fields, a field sent
            # twice): padding that made each entry 4 KiB, 455 MB from one tenant
            # (an outside audit); decided all the same, not remembered
            or _padded(request, key[1])
        ):
            return wire.check_response_bytes(rec)
        answer = wire.CheckAnswer(rec)
        self.check_memo.put(
            key, Remembered(ticket, answer, self.metrics.tallies_of(op, rec.decision))
        )
        return answer.encode(rec.decision_id, rec.decided_at)

    @rpc(pb.FilterRankRequest)
    def FilterRank(
        self, request: pb.FilterRankRequest, context: Ctx, principal: Principal
    ) -> bytes:
        ns = self.auth.namespace(principal, request.namespace)
        serde.count(request.candidates, "candidates", "candidates")
        # one pass over the message (each element read makes a wrapper), then the ids
        pairs = [(c.memory_id, c.similarity) for c in request.candidates]
        serde.candidate_ids([mid for mid, _ in pairs], "candidates[{}].memory_id")
        ranked = self.engine.filter_rank(
            ns,
            pairs,
            self.acting(principal, request.actor, ns),
            budget=serde.budget(request),
            historical=request.historical,
            limit=request.limit,
            time=serde.from_ts(request, "time"),
        )
        self.metrics.count("read", (c.decision.decision for c in ranked))
        return wire.filter_rank_bytes(ranked)  # encoded: sent as is (see `register`)

    @rpc(pb.RecordRequest)
    def Record(
        self, request: pb.RecordRequest, context: Ctx, principal: Principal
    ) -> pb.RecordResponse:
        ns = self.auth.namespace(principal, request.namespace)
        self._check_memory(request)
        proposed = serde.record_from_pb(ns, request.memory)
        creator = self.auth.speaks(
            principal, Creator(proposed.creator_kind, proposed.creator_id), "memory.creator.id"
        )
        try:
            result = self.engine.record(
                proposed,
                self.acting(principal, request.actor, ns, creator),
                budget=serde.budget(request),
                time=serde.from_ts(request, "time"),
            )
        except LineageError as err:
            # The store names record fields ("tags[3]", "value"); the client sent them
            # in `memory` ("memory.tags[3]", "memory.claim.value").
            err.field = serde.memory_field(err.field) or err.field
            raise
        return self._write_response(
            result,
            pb.RecordResponse(recorded=result.recorded, superseded_id=result.superseded_id or ""),
        )

    @rpc(pb.UpdateStatusRequest)
    def UpdateStatus(
        self, request: pb.UpdateStatusRequest, context: Ctx, principal: Principal
    ) -> pb.UpdateStatusResponse:
        ns = self.auth.namespace(principal, request.namespace)
        action = serde.STATUS_ACTION_FROM_PB.get(request.action)
        if action is None:
            raise ValidationError("must be REVOKE, SUPERSEDE, CONFIRM or COMPRESS", field="action")
        serde.ids([request.memory_id], "memory_id", indexed=False)
        if request.successor_id:
            serde.ids([request.successor_id], "successor_id", indexed=False)
        if request.successor_id and action not in ("supersede", "compress"):
            raise ValidationError(  # before: applied, and the successor silently dropped
                f"only SUPERSEDE and COMPRESS name a successor, not {action.upper()}",
                field="successor_id",
            )
        if request.expected_version < 0:
            raise ValidationError(
                f"must be >= 0 (0: any version), got {request.expected_version}",
                field="expected_version",
            )
        try:
            result = self.engine.update_status(
                ns,
                request.memory_id,
                action,
                self.acting(principal, request.actor, ns),
                successor=request.successor_id or None,
                reason=request.reason,
                expected_version=request.expected_version or None,
                time=serde.from_ts(request, "time"),
            )
        except LineageError as err:  # the engine's names for what the request calls so
            err.field = _UPDATE_FIELDS.get(err.field or "", err.field)
            raise
        return self._write_response(result, pb.UpdateStatusResponse(applied=result.applied))

    @rpc(pb.ReviseRequest)
    def Revise(
        self, request: pb.ReviseRequest, context: Ctx, principal: Principal
    ) -> pb.ReviseResponse:
        # A new version of a memory: checked as Record checks its memory, decided as an
        # update (engine/revisions.py), written in one store step.
        ns = self.auth.namespace(principal, request.namespace)
        self._check_memory(request)
        if request.expected_version < 1:
            raise ValidationError(
                f"is required: the version this revision replaces, got {request.expected_version}",
                field="expected_version",
            )
        proposed = serde.record_from_pb(ns, request.memory)
        creator = self.auth.speaks(
            principal, Creator(proposed.creator_kind, proposed.creator_id), "memory.creator.id"
        )
        try:
            result = self.engine.revise(
                proposed,
                request.expected_version,
                self.acting(principal, request.actor, ns, creator),
                budget=serde.budget(request),
                time=serde.from_ts(request, "time"),
            )
        except LineageError as err:
            err.field = serde.memory_field(err.field) or err.field  # as Record names them
            raise
        self.metrics.count(result.decision.operation, (result.decision.decision,))
        out = pb.ReviseResponse(applied=result.applied, previous_version=result.previous_version)
        out.affected_ids.extend(result.affected_ids)
        serde.decision_to_pb(result.decision, out.decision)
        if result.memory is not None:
            serde.memory_to_pb(result.memory, out.memory)
        return out

    def _check_memory(self, request: pb.RecordRequest | pb.ReviseRequest) -> None:
        """The `memory` of a Record or a Revise: present, its id and dependencies well
        formed and within the store's limit, before it is converted."""
        if not request.HasField("memory"):
            raise ValidationError("is required", field="memory")
        serde.ids([request.memory.id], "memory.id", indexed=False)
        serde.count(
            request.memory.dependencies,
            "memory.dependencies",
            "dependencies",
            self.engine.store.limits.max_dependencies,
        )
        serde.ids(request.memory.dependencies, "memory.dependencies")

    def _write_response(self, result: RecordResult | StatusResult, out: _Written) -> _Written:
        """Record and UpdateStatus answer alike: the decision, the memory as stored
        (when written) and the descendants a cascade marked."""
        self.metrics.count(result.decision.operation, (result.decision.decision,))
        out.affected_ids.extend(result.affected_ids)
        serde.decision_to_pb(result.decision, out.decision)
        if result.memory is not None:
            serde.memory_to_pb(result.memory, out.memory)
        return out

    @rpc(pb.FeedbackRequest)
    def Feedback(
        self, request: pb.FeedbackRequest, context: Ctx, principal: Principal
    ) -> pb.FeedbackResponse:
        # `note` is the caller's own: it is not kept, so not checked.
        ns = self.auth.namespace(principal, request.namespace)
        updated = self.engine.feedback(
            ns,
            serde.decision_id(request.decision_id),
            serde.ids(request.memory_ids, "memory_ids"),
            request.success,
            time=serde.from_ts(request, "time"),
        )
        return pb.FeedbackResponse(updated=updated)

    @rpc(pb.GrantRequest)
    def RecordGrant(
        self, request: pb.GrantRequest, context: Ctx, principal: Principal
    ) -> pb.GrantResponse:
        # The issuer is the actor: a grant recorded by anyone but a user is kept, inert.
        ns = self.auth.namespace(principal, request.namespace)
        stored = self.engine.record_grant(
            serde.grant_from_pb(ns, request.grant),
            self.acting(principal, request.actor, ns),
            serde.from_ts(request, "time"),
        )
        return pb.GrantResponse(grant=serde.grant_to_pb(stored, stored.created_at))

    @rpc(pb.ObjectRequest)
    def Object(
        self, request: pb.ObjectRequest, context: Ctx, principal: Principal
    ) -> pb.ObjectResponse:
        # The owner speaks for its memory: the actor is who objects (unset: the user).
        ns = self.auth.namespace(principal, request.namespace)
        postponed = self.engine.object_to(
            ns,
            check_id(request.memory_id, "memory_id"),
            self.acting(principal, request.actor, ns),
            request.reason,
            serde.from_ts(request, "time"),
        )
        out = pb.ObjectResponse()
        serde.proposal_to_pb(postponed, self.engine.objections_left(postponed), out.proposal)
        return out

    @rpc(pb.ExplainRequest)
    def Explain(
        self, request: pb.ExplainRequest, context: Ctx, principal: Principal
    ) -> pb.ExplainResponse:
        ns = self.auth.namespace(principal, request.namespace)
        deepest = self.engine.store.limits.max_walk_depth
        for name in ("ancestor_depth", "descendant_depth"):
            serde.depth(getattr(request, name), name, deepest)
        # More than the journal keeps per memory simply returns what it keeps.
        serde.depth(request.decisions, "decisions", 2**31 - 1)
        serde.ids([request.memory_id], "memory_id", indexed=False)
        ex = self.engine.explain(
            ns,
            request.memory_id,
            ancestor_depth=request.ancestor_depth or 8,
            descendant_depth=request.descendant_depth or 8,
            decisions=request.decisions or 20,
        )
        return serde.explain_to_pb(ex)

    def Watch(
        self, request: bytes | pb.WatchRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.LineageEvent]:
        """A resumable stream: events strictly after the cursor, then new ones as they come.
        A caller holds at most WATCH_STREAMS_PER_CALLER of them at once."""
        held: str | None = None
        try:
            principal = self.principal(context)
            with self._watching_lock:
                open_now = self._watching.get(principal.name, 0)
                if open_now >= WATCH_STREAMS_PER_CALLER:
                    raise TooManyStreams(
                        f"this caller has {open_now} Watch streams open, the most it may: "
                        "close one, or watch several namespaces from one stream per namespace"
                    )
                self._watching[principal.name] = open_now + 1
                held = principal.name
            if type(request) is bytes:  # as `register` registers it
                request = serde.parse(pb.WatchRequest, request)
            assert isinstance(request, pb.WatchRequest)
            ns = self.auth.namespace(principal, request.namespace)
            store = self.engine.store
            cursor: str | None = request.cursor or None
            if cursor is None and not request.from_oldest:
                cursor = store.latest_cursor(ns)
            while context.is_active():
                if self.stopping.is_set():
                    raise ShuttingDown("the sidecar is shutting down: resume from your last cursor")
                events, cursor = store.wait_events(
                    ns, after=cursor, limit=500, timeout=self.WATCH_POLL
                )
                for e in events:
                    yield serde.event_to_pb(e)
        except LineageError as err:
            abort_with(err, context)  # raises
        except Exception:
            _internal("Watch", context, self.metrics)  # raises
        finally:
            if held is not None:
                with self._watching_lock:
                    left = self._watching[held] - 1
                    if left:
                        self._watching[held] = left
                    else:
                        del self._watching[held]


def register(service: ServiceBase, server: Any, pool: CallPool | None = None) -> None:
    """The MemLineage or PolicyAdmin service on `server` (`registration.register`: its
    requests in as bytes, Check's and FilterRank's answers out as the bytes encoded;
    unary calls telling `pool`, the server's, when their request came), Watch on the
    servicer's pool."""
    if isinstance(service, MemLineageService):
        add, streams = pb_grpc.add_MemLineageServicer_to_server, {"Watch": service.watch_pool}
    else:
        add, streams = pb_grpc.add_PolicyAdminServicer_to_server, {}
    registration.register(service, add, server, pool, streams)

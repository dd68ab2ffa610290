"""OpenTelemetry server spans of the sidecar's RPCs (the `tracing` extra), off by default.

Imported only when the `tracing` setting is not `off` (`sidecar.py`): with tracing off
nothing of OpenTelemetry is imported and the gRPC server has no interceptor, so the
request path is exactly what it was. With it on, a server interceptor wraps each unary
handler in a SERVER span named after the gRPC method (`memlineage.v1.MemLineage/Check`),
a child of the caller's span when the call carries W3C `traceparent` metadata, with the
namespace it acted in (a request naming none: its token's first) and its operation, the
answer's effect and decision id, and the gRPC status code; the decision log writes the
span's ids into each line decided inside it (`current_ids`). Watch streams are not
traced: one lives for minutes.

The tracer provider is this sidecar's own, not the process-global one, so that sidecars
sharing a process (the tests) keep their spans apart; spans leave through a batch
processor (never exported on the request's thread), flushed by `shutdown`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any

import grpc
from google.protobuf.message import DecodeError, Message
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from memlineage import __version__
from memlineage.config import ConfigError
from memlineage.grpc_api.auth import ACTING_IN
from memlineage.v1 import memlineage_pb2 as pb

__all__ = ["Tracing", "current_ids", "exporter_for"]

_PROPAGATOR = TraceContextTextMapPropagator()
_CARRIED = ("traceparent", "tracestate")
# gRPC codes that are the server's failure (OpenTelemetry's gRPC conventions): the span's
# status is ERROR; a caller's error (INVALID_ARGUMENT, NOT_FOUND, ...) leaves it unset.
_SERVER_FAULTS = {
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DATA_LOSS,
}
Classes = tuple[type[Message], type[Message]]


def _methods() -> dict[str, Classes]:
    """`/memlineage.v1.MemLineage/Check` -> (request class, response class), every unary
    method of both services."""
    out: dict[str, Classes] = {}
    for service in pb.DESCRIPTOR.services_by_name.values():
        for m in service.methods:
            if not m.server_streaming and not m.client_streaming:
                out[f"/{service.full_name}/{m.name}"] = (
                    getattr(pb, m.input_type.name),
                    getattr(pb, m.output_type.name),
                )
    return out


def current_ids() -> tuple[str, str] | None:
    """(trace_id, span_id) in hex of the span current on this thread; None outside one."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"


def _name(value: int, enum: Any, prefix: str) -> str:
    try:
        return str(enum.Name(value)).removeprefix(prefix).lower()
    except ValueError:
        return str(value)


def _request_attributes(span: Span, request: Any, cls: type[Message]) -> None:
    """Namespace, operation and action of the request (arrived as bytes, see
    `servicer.register`); an undecodable one has none."""
    if type(request) is bytes:
        try:
            request = cls.FromString(request)
        except DecodeError:
            return
    fields = request.DESCRIPTOR.fields_by_name
    if "namespace" in fields and request.namespace:
        # what the caller asked for (cut: it is the caller's text, not yet checked);
        # replaced by the namespace the call acted in once it is known (`_acted_in`)
        span.set_attribute("memlineage.namespace", _cut(request.namespace, MAX_NAMESPACE))
    if "operation" in fields:
        span.set_attribute(
            "memlineage.operation", _name(request.operation, pb.Operation, "OPERATION_")
        )
    if "action" in fields and isinstance(request.action, str) and request.action:
        span.set_attribute("memlineage.action", _cut(request.action, MAX_ACTION))


MAX_NAMESPACE = 128
"""A namespace's longest name (config's token check): a longer one asked is cut."""
MAX_ACTION = 256
"""An action's longest name (the servicer's `MAX_ACTION_LENGTH`): a longer one is cut,
as the servicer refuses it (before: the 4 MB a message may carry went into the span,
to every exporter, before the request was refused)."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _acted_in(span: Span) -> None:
    """The namespace the call acted in (`auth.ACTING_IN`): a request naming none acts in
    its token's first namespace (before: every such span said `default`, another
    tenant's namespace on a sidecar with tokens)."""
    acted = ACTING_IN.get()
    if acted is not None:
        span.set_attribute("memlineage.namespace", acted)


def _response_attributes(span: Span, response: Any, cls: type[Message]) -> None:
    """Effect and decision id of the answer's decision; FilterRank's, one per candidate."""
    if type(response) is bytes:  # Check and FilterRank answer encoded (registration.ENCODED)
        response = cls.FromString(response)
    fields = response.DESCRIPTOR.fields_by_name
    if "decision" in fields and response.HasField("decision"):
        d = response.decision
        span.set_attribute("memlineage.decision_id", d.decision_id)
        span.set_attribute("memlineage.effect", _name(d.effect, pb.Effect, "EFFECT_"))
        span.set_attribute("memlineage.operation", _name(d.operation, pb.Operation, "OPERATION_"))
        span.set_attribute("memlineage.policy_version", d.policy_version)
    elif isinstance(response, pb.FilterRankResponse):
        ds = [c.decision for c in response.candidates]
        span.set_attribute("memlineage.operation", "read")
        span.set_attribute("memlineage.decision_ids", [d.decision_id for d in ds])
        span.set_attribute(
            "memlineage.effects", [_name(d.effect, pb.Effect, "EFFECT_") for d in ds]
        )


def _finish(span: Span, context: grpc.ServicerContext, failed: bool) -> None:
    """The gRPC status of the call: the code the handler aborted with, else OK."""
    code = context.code() if hasattr(context, "code") else None
    if code is None:
        code = grpc.StatusCode.UNKNOWN if failed else grpc.StatusCode.OK
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code in _SERVER_FAULTS:
        details = context.details() if hasattr(context, "details") else None
        text = details.decode("utf-8", "replace") if isinstance(details, bytes) else details
        span.set_status(Status(StatusCode.ERROR, text or code.name))


class _Interceptor(grpc.ServerInterceptor):
    """Wraps each unary handler in a span (module docstring); the wrapper is built once
    per handler and reused."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer
        self._methods = _methods()
        self._wrapped: dict[str, tuple[Any, Any]] = {}  # method -> (handler, traced one)

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        handler = continuation(details)
        method = details.method
        if handler is None or handler.unary_unary is None or method not in self._methods:
            return handler
        known = self._wrapped.get(method)
        if known is None or known[0] is not handler:
            known = (handler, handler._replace(unary_unary=self._traced(method, handler)))
            self._wrapped[method] = known
        return known[1]

    def _traced(self, method: str, handler: Any) -> Callable[[Any, Any], Any]:
        inner = handler.unary_unary
        request_class, response_class = self._methods[method]
        name = method.lstrip("/")
        service, _, rpc_method = name.partition("/")
        base = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": rpc_method}
        tracer = self._tracer

        def traced(request: Any, context: grpc.ServicerContext) -> Any:
            carrier = {
                k: v
                for k, v in (context.invocation_metadata() or ())
                if k in _CARRIED and isinstance(v, str)
            }
            with tracer.start_as_current_span(
                name,
                context=_PROPAGATOR.extract(carrier),  # an empty one (a root) without it
                kind=SpanKind.SERVER,
                attributes=base,
                record_exception=False,  # an abort is a status, not a crash
                set_status_on_exception=False,
            ) as span:
                _request_attributes(span, request, request_class)
                acting = ACTING_IN.set(None)  # set by the call once its namespace is known
                try:
                    response = inner(request, context)
                except BaseException:
                    _acted_in(span)
                    _finish(span, context, failed=True)
                    raise
                else:
                    _acted_in(span)
                finally:
                    ACTING_IN.reset(acting)
                _response_attributes(span, response, response_class)
                _finish(span, context, failed=False)
                return response

        return traced


class _JsonLines(ConsoleSpanExporter):
    """Spans as one JSON object a line, to stderr or to a file it owns (closed on
    shutdown): for a collector's file receiver, `jq`, or a test."""

    def __init__(self, out: IO[str], owned: bool) -> None:
        super().__init__(out=out, formatter=lambda s: s.to_json(indent=None) + "\n")
        self._file, self._owned = out, owned

    def shutdown(self) -> None:
        super().shutdown()
        if self._owned:
            self._file.close()


def exporter_for(target: str) -> SpanExporter:
    """The exporter a `tracing` setting names (config.py validates its form)."""
    if target == "console":
        return _JsonLines(sys.stderr, owned=False)
    if target.startswith("file:"):
        path = target.removeprefix("file:")
        try:
            return _JsonLines(open(path, "a", encoding="utf-8", buffering=1), owned=True)
        except OSError as exc:
            raise ConfigError(f"tracing: {path}: cannot be opened ({exc.strerror})") from exc
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise ConfigError(
            f"tracing = {target!r} exports OTLP/HTTP, which needs "
            "opentelemetry-exporter-otlp-proto-http "
            "(pip install -e '.[tracing]' (in the repository))"
        ) from exc
    return OTLPSpanExporter(endpoint=target)


class Tracing:
    """This sidecar's tracer provider, its server interceptor and the decision log's
    span ids: built by `start`, ended by `shutdown` (the last spans exported)."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.interceptors: Sequence[grpc.ServerInterceptor] = (
            _Interceptor(provider.get_tracer("memlineage", __version__)),
        )
        self.current_ids = current_ids

    @classmethod
    def start(cls, target: str, sidecar_id: str, exporter: SpanExporter | None = None) -> Tracing:
        """Spans to `target` (or to `exporter`, e.g. the SDK's InMemorySpanExporter);
        the resource names the service `memlineage` unless OTEL_SERVICE_NAME does."""
        attributes = {"service.version": __version__, "service.instance.id": sidecar_id}
        if not os.environ.get("OTEL_SERVICE_NAME"):
            attributes["service.name"] = "memlineage"
        provider = TracerProvider(resource=Resource.create(attributes))
        provider.add_span_processor(BatchSpanProcessor(exporter or exporter_for(target)))
        return cls(provider)

    def shutdown(self) -> None:
        self.provider.shutdown()

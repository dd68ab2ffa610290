"""OpenTelemetry tracing of a real sidecar: one SERVER span per unary RPC, named after
the gRPC method, with the namespace, operation, effect, decision id and status code; a
child of the caller's W3C `traceparent`; its ids in the decision-log lines, whose chain
still verifies. With tracing off nothing of OpenTelemetry is imported; set without the
package, the sidecar refuses to start naming the extra. Spans leave through the SDK's
own exporters: JSON lines to a file, and OTLP/HTTP to a loopback receiver."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
from memlineage import cli
from memlineage.client import MemLineageClient, MemLineageError, NotFound
from memlineage.config import Config
from memlineage.v1 import memlineage_pb2 as pb
from memlineage.v1 import memlineage_pb2_grpc as pb_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support.sidecar import BUNDLED_POLICIES, REPO, RunningSidecar

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


def spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_spans_per_rpc_child_of_traceparent_and_ids_in_the_log(tmp_path: Path) -> None:
    out, log = tmp_path / "spans.jsonl", tmp_path / "decisions.log"
    config = Config(
        policy_dir=BUNDLED_POLICIES,
        decision_log=str(log),
        tracing=f"file:{out}",
        sidecar_id="sidecar-7",
    )
    with RunningSidecar(config) as sidecar:  # stopped at the end: spans are flushed
        with MemLineageClient(sidecar.address) as c:
            c.record("city", creator="user:alice")
            c.record("guess", creator="reasoning:planner", confidence=0.4)
            with pytest.raises(NotFound):
                c.explain("nowhere")
            c.filter_rank([("city", 0.9), ("guess", 0.8)])
        with grpc.insecure_channel(sidecar.address) as channel:
            answer = pb_grpc.MemLineageStub(channel).Check(
                pb.CheckRequest(operation=pb.OPERATION_READ, memory_id="city"),
                metadata=(("traceparent", TRACEPARENT),),
                timeout=10,
            )

    found = spans(out)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for s in found:
        by_name.setdefault(s["name"], []).append(s)
    assert sorted(by_name) == [
        "memlineage.v1.MemLineage/Check",
        "memlineage.v1.MemLineage/Explain",
        "memlineage.v1.MemLineage/FilterRank",
        "memlineage.v1.MemLineage/Record",
    ]
    assert all(s["kind"] == "SpanKind.SERVER" for s in found)
    record = by_name["memlineage.v1.MemLineage/Record"][0]["attributes"]
    assert record["rpc.system"] == "grpc" and record["rpc.method"] == "Record"
    assert record["memlineage.namespace"] == "default"
    assert record["memlineage.operation"] == "write"
    assert record["memlineage.effect"] == "allow"
    assert record["rpc.grpc.status_code"] == 0
    (child,) = by_name["memlineage.v1.MemLineage/Check"]
    (missing,) = by_name["memlineage.v1.MemLineage/Explain"]
    assert missing["attributes"]["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]
    assert missing["status"]["status_code"] == "UNSET"  # the caller's error, not a fault
    assert missing["parent_id"] is None
    # The call with a traceparent is a child of the caller's span, in the caller's trace.
    assert child["context"]["trace_id"] == f"0x{CALLER_TRACE}"
    assert child["parent_id"] == f"0x{CALLER_SPAN}"
    attrs = child["attributes"]
    assert attrs["memlineage.operation"] == "read"
    assert attrs["memlineage.decision_id"] == answer.decision.decision_id
    assert attrs["memlineage.effect"] == "allow"
    ranked = by_name["memlineage.v1.MemLineage/FilterRank"][0]["attributes"]
    assert ranked["memlineage.effects"] == ["allow", "deny"]

    # Each decision-log line names the span it was decided in; the chain verifies.
    logged = {e["decision_id"]: e for e in lines(log)}
    line = logged[answer.decision.decision_id]
    assert line["trace_id"] == CALLER_TRACE
    assert line["span_id"] == child["context"]["span_id"].removeprefix("0x")
    assert line["labels"]["id"] == "sidecar-7"
    assert all("trace_id" in e for e in logged.values())
    assert cli.main(["log", "verify", str(log)]) == 0


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "tests")},
    )


_START = """
import asyncio, sys
{prelude}
from memlineage.client import MemLineageClient
from memlineage.config import Config
from memlineage.sidecar import start_sidecar

async def main():
    s = await start_sidecar(Config(policy_dir={policies!r}, listen="127.0.0.1:0",
                                   decision_log="off", tracing={tracing!r}))
    def calls():
        with MemLineageClient(f"127.0.0.1:{{s.port}}") as c:
            c.record("m", creator="user:alice")
            c.check("read", "m")
    await asyncio.get_running_loop().run_in_executor(None, calls)
    await s.stop(0.1)

asyncio.run(main())
print(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"))
"""


@pytest.mark.any_runtime
def test_tracing_off_imports_nothing_of_opentelemetry() -> None:
    done = _run(_START.format(prelude="", policies=BUNDLED_POLICIES, tracing="off"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.any_runtime
def test_tracing_on_without_the_package_refuses_to_start_naming_the_extra() -> None:
    # `sys.modules[name] = None` makes importing it fail as an absent package does.
    prelude = "sys.modules['opentelemetry'] = None"
    done = _run(_START.format(prelude=prelude, policies=BUNDLED_POLICIES, tracing="console"))
    assert done.returncode == 1
    assert "ConfigError: tracing = 'console' needs OpenTelemetry" in done.stderr
    assert "pip install -e '.[tracing]' (in the repository)" in done.stderr


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver on loopback: keeps each export request it decodes."""

    received: list[ExportTraceServiceRequest] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append(ExportTraceServiceRequest.FromString(body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, *args: object) -> None:
        pass


def test_otlp_http_export_to_a_loopback_collector() -> None:
    collector = HTTPServer(("127.0.0.1", 0), _Collector)
    _Collector.received = []
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{collector.server_port}/v1/traces"
    try:
        config = Config(policy_dir=BUNDLED_POLICIES, tracing=endpoint, sidecar_id="sc-otlp")
        with RunningSidecar(config) as s, MemLineageClient(s.address) as c:
            c.record("m", creator="user:alice")
            c.check("read", "m")
    finally:
        collector.shutdown()
        collector.server_close()
    exported = [
        (rs, span)
        for req in _Collector.received
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    ]
    names = sorted(span.name for _, span in exported)
    assert names == ["memlineage.v1.MemLineage/Check", "memlineage.v1.MemLineage/Record"]
    resource = {a.key: a.value.string_value for a in exported[0][0].resource.attributes}
    assert resource["service.name"] == "memlineage"
    assert resource["service.instance.id"] == "sc-otlp"


@pytest.mark.any_runtime
def test_only_the_tracing_module_imports_opentelemetry() -> None:
    """Everything else runs without the extra: the import stays behind the setting."""
    from test_layering import tree_imports

    importers = {
        i.module
        for i in tree_imports()
        if i.target == "opentelemetry" or i.target.startswith("opentelemetry.")
    }
    assert importers == {"memlineage.grpc_api.tracing"}


def test_a_span_names_the_namespace_the_call_acted_in(tmp_path: Path) -> None:
    """With tokens, a request naming no namespace acts in its token's first one: its span
    said `default` (another tenant's, here), a memo-answered Check's too. A caller's
    action is cut as the servicer refuses it, not carried whole (up to the 4 MB a
    message holds) to every exporter."""
    from memlineage.config import TokenGrant

    out = tmp_path / "spans.jsonl"
    config = Config(
        policy_dir=BUNDLED_POLICIES,
        decision_log="off",
        tracing=f"file:{out}",
        tokens=(TokenGrant("tok-a", ("a",), name="a"), TokenGrant("tok-d", ("default",))),
    )
    with RunningSidecar(config) as sidecar:
        with MemLineageClient(sidecar.address, token="tok-a", retries=0) as c:
            c.record("city", creator="user:alice")
            c.check("read", "city")
            c.check("read", "city")  # the same bytes: answered from the Check memo
            with pytest.raises(MemLineageError):
                c.check("read", "city", action="x" * 100_000)
        with (
            MemLineageClient(sidecar.address, token="tok-a", namespace="b", retries=0) as c,
            pytest.raises(MemLineageError),
        ):
            c.check("read", "city")
    found = [s["attributes"] for s in spans(out)]
    ns = [(a["rpc.method"], a.get("memlineage.namespace")) for a in found]
    assert ns == [
        ("Record", "a"),
        ("Check", "a"),
        ("Check", "a"),
        ("Check", "a"),
        ("Check", "b"),  # refused: the one it asked for
    ]
    long = found[3]
    assert long["rpc.grpc.status_code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert long["memlineage.action"] == "x" * 256 + "…"

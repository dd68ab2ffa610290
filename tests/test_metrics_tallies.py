"""The decision and latency tallies render as the Prometheus families they replace."""

from __future__ import annotations

from memlineage.metrics import Metrics
from memlineage_dsl.decision import Decision, Reason
from prometheus_client import generate_latest


def _sample(m: Metrics, name: str, labels: dict[str, str]) -> float | None:
    return m.registry.get_sample_value(name, labels)


def test_counts_and_histogram() -> None:
    m = Metrics()
    deny = Decision("deny", 0.0, 0.0, reasons=(Reason("p", "deny", "x", 1, "fired"),))
    allow = Decision("allow", 1.0, 0.0)
    m.count("read", (deny,))
    m.count("read", [deny, allow, deny])  # a batch: shared objects counted with multiplicity
    m.count("act", (allow,))
    for seconds in (0.00005, 0.0003, 0.0003, 0.02, 3.0):
        m.observe_latency("Check", seconds)
    assert _sample(m, "memlineage_decisions_total", {"operation": "read", "effect": "deny"}) == 3
    assert _sample(m, "memlineage_decisions_total", {"operation": "read", "effect": "allow"}) == 1
    assert _sample(m, "memlineage_decisions_total", {"operation": "act", "effect": "allow"}) == 1
    assert (
        _sample(
            m,
            "memlineage_policy_decisions_total",
            {"policy": "p", "effect": "deny", "status": "fired"},
        )
        == 3
    )
    bucket = "memlineage_rpc_latency_seconds_bucket"
    assert _sample(m, bucket, {"method": "Check", "le": "0.0001"}) == 1
    assert _sample(m, bucket, {"method": "Check", "le": "0.0005"}) == 3
    assert _sample(m, bucket, {"method": "Check", "le": "0.025"}) == 4
    assert _sample(m, bucket, {"method": "Check", "le": "1.0"}) == 4
    assert _sample(m, bucket, {"method": "Check", "le": "+Inf"}) == 5
    assert _sample(m, "memlineage_rpc_latency_seconds_count", {"method": "Check"}) == 5
    assert (
        abs(_sample(m, "memlineage_rpc_latency_seconds_sum", {"method": "Check"}) - 3.02065) < 1e-9
    )
    text = generate_latest(m.registry).decode()
    assert "# TYPE memlineage_rpc_latency_seconds histogram" in text
    assert "# TYPE memlineage_decisions_total counter" in text

"""Prometheus metrics count decisions by effect and policy, and RPC latency."""

from __future__ import annotations

import pytest
from memlineage.client import MemLineageClient, NotFound
from prometheus_client import generate_latest
from support.sidecar import RunningSidecar


def test_decisions_latency_and_errors_are_counted() -> None:
    with RunningSidecar() as s, MemLineageClient(s.address) as c:
        c.record("guess", creator="reasoning:planner", confidence=0.3)
        c.record("fact", creator="user:alice")
        for _ in range(3):
            c.check("read", "guess")
        c.filter_rank([("fact", 0.5), ("guess", 0.9)])
        with pytest.raises(NotFound):
            c.explain("missing")
        assert s.sidecar is not None
        text = generate_latest(s.sidecar.metrics.registry).decode()
    assert 'memlineage_decisions_total{effect="deny",operation="read"} 4.0' in text
    assert 'memlineage_decisions_total{effect="allow",operation="read"} 1.0' in text
    assert (
        'memlineage_policy_decisions_total{effect="deny",policy="low_confidence_reasoning",'
        'status="fired"} 4.0'
    ) in text
    assert 'memlineage_rpc_latency_seconds_count{method="Check"} 3.0' in text
    assert 'memlineage_rpc_errors_total{code="NOT_FOUND",method="Explain"} 1.0' in text
    # The 2nd and 3rd Check, then FilterRank's "guess", reused the 1st Check's decision.
    assert "memlineage_decisions_reused_total 3.0" in text

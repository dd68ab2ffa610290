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


def test_calls_without_a_valid_token_are_counted_and_logged_once_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A refused call left no trace (an audit): now counted by reason, and logged with
    its peer and method, one line per reason a minute with how many came since."""
    import logging

    from memlineage.client import Unauthenticated
    from memlineage.config import Config, TokenGrant
    from support.sidecar import BUNDLED_POLICIES

    config = Config(
        policy_dir=BUNDLED_POLICIES,
        decision_log="off",
        tokens=(TokenGrant("ok", ("a",), name="a"),),
    )
    with caplog.at_level(logging.WARNING, logger="memlineage.auth"), RunningSidecar(config) as s:
        for token in ("wrong", "wrong", None, "ok"):
            with MemLineageClient(s.address, token=token, namespace="a", retries=0) as c:
                if token == "ok":
                    c.check("read", "m")
                    continue
                with pytest.raises(Unauthenticated):
                    c.check("read", "m")
        assert s.sidecar is not None
        text = generate_latest(s.sidecar.metrics.registry).decode()
    assert 'memlineage_unauthenticated_total{reason="unknown"} 2.0' in text
    assert 'memlineage_unauthenticated_total{reason="missing"} 1.0' in text
    lines = [r.getMessage() for r in caplog.records if r.name == "memlineage.auth"]
    assert len(lines) == 2, lines  # one per reason: the second unknown token is counted
    assert lines[0].startswith(
        "refused a call without a valid token (unknown) from ipv4:127.0.0.1:"
    )
    assert lines[0].endswith("to /memlineage.v1.MemLineage/Check")
    assert "wrong" not in " ".join(lines)  # never the token itself

"""Prometheus metrics: decisions by effect and policy, RPC latency, store errors.

Label children are bound once; the hot path only increments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from memlineage_dsl.decision import Decision
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.decisions = Counter(
            "memlineage_decisions_total", "Decisions taken, by operation and effect",
            ["operation", "effect"], registry=self.registry,
        )
        self.policy_hits = Counter(
            "memlineage_policy_decisions_total",
            "Rules that took part in a decision, by policy, effect and status",
            ["policy", "effect", "status"], registry=self.registry,
        )
        self.latency = Histogram(
            "memlineage_rpc_latency_seconds", "RPC handling time, by method", ["method"],
            buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                     0.25, 1.0),
            registry=self.registry,
        )
        self.store_errors = Counter(
            "memlineage_store_errors_total", "Store unavailable errors, by method", ["method"],
            registry=self.registry,
        )
        self.rpc_errors = Counter(
            "memlineage_rpc_errors_total", "RPCs answered with an error status, by code",
            ["method", "code"], registry=self.registry,
        )
        self._children: dict[tuple[object, ...], object] = {}
        self._by_decision: dict[tuple[str, int], tuple[Decision, list]] = {}

    def watch_reuse(self, reused: Callable[[], int]) -> None:
        """Export how many decisions were answered by reuse, read at scrape time (the
        engine only bumps an int on its hot path)."""

        class _Reused:
            def collect(self) -> Iterator[CounterMetricFamily]:
                yield CounterMetricFamily(
                    "memlineage_decisions_reused",
                    "Decisions answered by reusing an identical earlier one (exact: "
                    "no write since, before its time horizon)", value=reused())

        self.registry.register(_Reused())  # type: ignore[arg-type]

    def _child(self, metric: Counter, key: tuple[str, ...]):
        child = self._children.get((id(metric), *key))
        if child is None:
            child = self._children[(id(metric), *key)] = metric.labels(*key)
        return child

    def observe_latency(self, method: str, seconds: float) -> None:
        self._child(self.latency, (method,)).observe(seconds)  # type: ignore[attr-defined]

    def count(self, operation: str, decisions: Iterable[Decision]) -> None:
        """Batches share decision objects (the evaluator reuses frozen ones): count each
        distinct one once, with its multiplicity."""
        if type(decisions) is tuple and len(decisions) == 1:  # one Check: no tally
            for child in self._counters(operation, decisions[0]):
                child.inc()
            return
        seen: dict[int, list] = {}
        for d in decisions:
            hit = seen.get(id(d))
            if hit is None:
                seen[id(d)] = [d, 1]
            else:
                hit[1] += 1
        for d, n in seen.values():
            for child in self._counters(operation, d):
                child.inc(n)

    def _counters(self, operation: str, d: Decision) -> list:
        """The counters one decision increments: bound once per (operation, decision
        object); decisions are frozen and shared, so most are seen again."""
        key = (operation, id(d))
        hit = self._by_decision.get(key)
        if hit is not None and hit[0] is d:
            return hit[1]
        children = [self._child(self.decisions, (operation, d.effect))]
        children += [self._child(self.policy_hits, (r.policy, r.effect, r.status))
                     for r in d.reasons]
        if len(self._by_decision) >= 4096:
            self._by_decision.clear()
        self._by_decision[key] = (d, children)
        return children

"""Prometheus metrics: decisions by effect and policy, RPC latency, store errors.

Decision counts and latencies are on every request's path, so they are tallied in
plain Python cells (an integer add under one lock; no label lookup) and turned
into Prometheus families only when scraped (`_Tallies.collect`). The servicers
run on several threads: the lock keeps every add. Rare events (errors) use
prometheus_client's own counters.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Iterator

from memlineage_dsl.decision import Decision
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class _Latency:
    """One method's latency histogram: a count per bucket (non-cumulative), the sum."""

    __slots__ = ("buckets", "sum")

    def __init__(self) -> None:
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # the last one: +Inf
        self.sum = 0.0


class _Tallies:
    """The counts behind the decision and latency metrics, rendered at scrape time."""

    def __init__(self) -> None:
        self.decisions: dict[tuple[str, str], list[int]] = {}  # (operation, effect)
        self.policies: dict[tuple[str, str, str], list[int]] = {}  # (policy, effect, status)
        self.latency: dict[str, _Latency] = {}

    def collect(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        decisions = CounterMetricFamily(
            "memlineage_decisions",
            "Decisions taken, by operation and effect",
            labels=["operation", "effect"],
        )
        for key, cell in list(self.decisions.items()):
            decisions.add_metric(list(key), cell[0])
        yield decisions
        policies = CounterMetricFamily(
            "memlineage_policy_decisions",
            "Rules that took part in a decision, by policy, effect and status",
            labels=["policy", "effect", "status"],
        )
        for pkey, cell in list(self.policies.items()):
            policies.add_metric(list(pkey), cell[0])
        yield policies
        latency = HistogramMetricFamily(
            "memlineage_rpc_latency_seconds", "RPC handling time, by method", labels=["method"]
        )
        for method, h in list(self.latency.items()):
            running, cumulative = 0, []
            for bound, n in zip((*LATENCY_BUCKETS, float("inf")), h.buckets, strict=True):
                running += n
                cumulative.append((_bound(bound), running))
            latency.add_metric([method], cumulative, h.sum)
        yield latency


def _bound(value: float) -> str:
    return "+Inf" if value == float("inf") else repr(value)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._tallies = _Tallies()
        self.registry.register(self._tallies)
        self.store_errors = Counter(
            "memlineage_store_errors_total",
            "Store unavailable errors, by method",
            ["method"],
            registry=self.registry,
        )
        self.rpc_errors = Counter(
            "memlineage_rpc_errors_total",
            "RPCs answered with an error status, by code",
            ["method", "code"],
            registry=self.registry,
        )
        self.unauthenticated = Counter(
            "memlineage_unauthenticated_total",
            "Calls refused for want of a valid token, by reason (missing, unknown, duplicate)",
            ["reason"],
            registry=self.registry,
        )
        self._by_decision: dict[tuple[str, int], tuple[Decision, tuple[list[int], ...]]] = {}
        self._lock = threading.Lock()

    def watch_reuse(self, reused: Callable[[], int]) -> None:
        """Export how many decisions were answered by reuse, read at scrape time (the
        engine only bumps an int on its hot path)."""

        class _Reused:
            def collect(self) -> Iterator[CounterMetricFamily]:
                yield CounterMetricFamily(
                    "memlineage_decisions_reused",
                    "Decisions answered by reusing an identical earlier one (exact: "
                    "no write since, before its time horizon)",
                    value=reused(),
                )

        self.registry.register(_Reused())

    def watch_pools(self, pools: Callable[[], Iterable[tuple[str, int, int]]]) -> None:
        """Export the gRPC pools' threads and the calls on them still waiting for their
        request longer than a whole one takes, read at scrape time. `pools()`: (pool,
        threads, held calls)."""

        class _Pools:
            def collect(self) -> Iterator[GaugeMetricFamily]:
                rows = list(pools())
                threads = GaugeMetricFamily(
                    "memlineage_grpc_threads",
                    "Threads of a gRPC pool (grown for calls that never send their request)",
                    labels=("pool",),
                )
                held = GaugeMetricFamily(
                    "memlineage_grpc_calls_held",
                    "Calls on a gRPC pool that have waited over 0.25 s for their request",
                    labels=("pool",),
                )
                for name, n_threads, n_held in rows:
                    threads.add_metric((name,), n_threads)
                    held.add_metric((name,), n_held)
                yield threads
                yield held

        self.registry.register(_Pools())

    def watch_shadow(
        self, table: Callable[[], tuple[int, Iterable[tuple[str, str, str, int]]]]
    ) -> None:
        """Export the shadow candidate's comparisons and disagreements by (policy,
        serving effect, candidate effect), read at scrape time. `table()`: (compared,
        [(policy, serving, candidate, count)])."""

        class _Shadow:
            def collect(self) -> Iterator[CounterMetricFamily]:
                compared, rows = table()
                yield CounterMetricFamily(
                    "memlineage_shadow_compared",
                    "Fresh decisions the shadow candidate also took",
                    value=compared,
                )
                diff = CounterMetricFamily(
                    "memlineage_shadow_disagreements",
                    "Decisions the shadow candidate took with another effect, by the "
                    "policy whose firing differs",
                    labels=("policy", "serving", "candidate"),
                )
                for policy, serving, candidate, count in rows:
                    diff.add_metric((policy, serving, candidate), count)
                yield diff

        self.registry.register(_Shadow())

    def observe_latency(self, method: str, seconds: float) -> None:
        h = self._tallies.latency.get(method)
        if h is None:
            h = self._tallies.latency.setdefault(method, _Latency())
        i = bisect.bisect_left(LATENCY_BUCKETS, seconds)
        with self._lock:
            h.buckets[i] += 1
            h.sum += seconds

    def count(self, operation: str, decisions: Iterable[Decision]) -> None:
        """Batches share decision objects (the evaluator reuses frozen ones): count each
        distinct one once, with its multiplicity."""
        if type(decisions) is tuple and len(decisions) == 1:  # one Check: no tally
            self.count_again(self.tallies_of(operation, decisions[0]))
            return
        seen: dict[int, list] = {}
        for d in decisions:
            hit = seen.get(id(d))
            if hit is None:
                seen[id(d)] = [d, 1]
            else:
                hit[1] += 1
        cells = [(self.tallies_of(operation, d), n) for d, n in seen.values()]
        with self._lock:
            for tallies, n in cells:
                for cell in tallies:
                    cell[0] += n

    def count_again(self, tallies: tuple[list[int], ...]) -> None:
        with self._lock:
            for cell in tallies:
                cell[0] += 1

    def tallies_of(self, operation: str, d: Decision) -> tuple[list[int], ...]:
        """The tallies one decision adds to: found once per (operation, decision
        object); decisions are frozen and shared, so most are seen again. A caller
        counting one decision again and again (reuse) keeps them (`count_again`)."""
        key = (operation, id(d))
        hit = self._by_decision.get(key)
        if hit is not None and hit[0] is d:
            return hit[1]
        t = self._tallies
        cells = (
            t.decisions.setdefault((operation, d.effect), [0]),
            *(t.policies.setdefault((r.policy, r.effect, r.status), [0]) for r in d.reasons),
        )
        if len(self._by_decision) >= 4096:
            self._by_decision.clear()
        self._by_decision[key] = (d, cells)
        return cells

"""Decisions as the sidecar returns and remembers them.

`DecisionRecord` adds identity (decision id, operation, memories, time, policy
version) to the evaluator's `Decision`. `DecisionJournal` keeps the recent ones
per memory for Explain and by id for Feedback, bounded, in this process; the
JSON decision log is the durable trail.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import TextIO

from memlineage_dsl.decision import Decision


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    decision_id: str
    decision: Decision
    namespace: str
    operation: str
    memory_ids: tuple[str, ...]
    actor: str
    decided_at: float
    policy_version: str


_counter = 0
_counter_lock = threading.Lock()
_PREFIX = os.urandom(4).hex()


def new_decision_id(now: float) -> str:
    """Unique across sidecars: time (ms), a per-process random prefix, a counter."""
    global _counter
    with _counter_lock:
        _counter += 1
        n = _counter
    return f"d{int(now * 1000):x}-{_PREFIX}-{n:x}"


class DecisionLog:
    """One JSON line per decision. The part that depends only on the (shared,
    frozen) Decision is rendered once and reused."""

    def __init__(self, sink: TextIO | None) -> None:
        self.sink = sink
        self._bodies: dict[int, tuple[Decision, str]] = {}
        self._lock = threading.Lock()

    def _body(self, d: Decision) -> str:
        hit = self._bodies.get(id(d))
        if hit is not None and hit[0] is d:
            return hit[1]
        body = json.dumps(
            {
                "effect": d.effect,
                "score": round(d.compliance_score, 6),
                "cost": d.expected_cost,
                "policies": [r.policy for r in d.reasons],
                "reasons": [f"{r.policy}[{r.status}]: {r.message}" for r in d.reasons],
                "obligations": [str(o) for o in d.obligations],
                "errors": list(d.errors),
            },
            separators=(",", ":"),
        )[1:]
        if len(self._bodies) > 4096:
            self._bodies.clear()
        self._bodies[id(d)] = (d, body)
        return body

    def write(self, rec: DecisionRecord) -> None:
        if self.sink is None:
            return
        head = json.dumps(
            {
                "ts": rec.decided_at,
                "decision_id": rec.decision_id,
                "namespace": rec.namespace,
                "op": rec.operation,
                "memory_ids": list(rec.memory_ids),
                "actor": rec.actor,
                "policy_version": rec.policy_version,
            },
            separators=(",", ":"),
        )
        line = f"{head[:-1]},{self._body(rec.decision)}\n"
        with self._lock:
            self.sink.write(line)


class DecisionJournal:
    """Recent decisions per (namespace, memory) and by id, bounded in memory."""

    def __init__(self, per_memory: int = 20, by_id: int = 100_000) -> None:
        self._per_memory = per_memory
        self._recent: OrderedDict[tuple[str, str], deque[DecisionRecord]] = OrderedDict()
        self._by_id: OrderedDict[str, DecisionRecord] = OrderedDict()
        self._limit = by_id
        self._lock = threading.Lock()

    def add(self, rec: DecisionRecord) -> None:
        with self._lock:
            self._by_id[rec.decision_id] = rec
            if len(self._by_id) > self._limit:
                self._by_id.popitem(last=False)
            for mid in rec.memory_ids:
                key = (rec.namespace, mid)
                q = self._recent.get(key)
                if q is None:
                    q = self._recent[key] = deque(maxlen=self._per_memory)
                    if len(self._recent) > self._limit:
                        self._recent.popitem(last=False)
                q.appendleft(rec)

    def recent(self, namespace: str, memory_id: str, limit: int) -> list[DecisionRecord]:
        with self._lock:
            return list(self._recent.get((namespace, memory_id), ()))[:limit]

    def get(self, decision_id: str) -> DecisionRecord | None:
        with self._lock:
            return self._by_id.get(decision_id)

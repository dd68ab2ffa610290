"""Decisions as a store keeps them: `KeptDecision`, a plain record.

The engine issues decisions (`engine/records.py`) and hands them to the store in
batches, off the request path (`engine/decision_store.py`); the store keeps the last
`LineageStore.decision_retention` of each namespace, where Explain and Feedback of
any sidecar find them after a restart. A store knows no engine: what the decision
said (effect, compliance, reasons, obligations, errors) is `detail`, a JSON text the
engine encodes and decodes; the store reads only the identity fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class KeptDecision:
    decision_id: str
    namespace: str
    operation: str
    memory_ids: tuple[str, ...]
    actor: str
    decided_at: float
    policy_version: str
    effect: str
    detail: str
    """JSON text: compliance score, expected cost, reasons, obligations, errors."""

    def to_json(self) -> str:
        """One text holding every field (what a store writes)."""
        return json.dumps(
            [
                self.decision_id,
                self.namespace,
                self.operation,
                list(self.memory_ids),
                self.actor,
                self.decided_at,
                self.policy_version,
                self.effect,
                self.detail,
            ],
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> KeptDecision | None:
        """The decision `to_json` wrote; None for a text that is not one."""
        try:
            v: Any = json.loads(text)
            return cls(
                str(v[0]),
                str(v[1]),
                str(v[2]),
                tuple(str(m) for m in v[3]),
                str(v[4]),
                float(v[5]),
                str(v[6]),
                str(v[7]),
                str(v[8]),
            )
        except (ValueError, TypeError, IndexError, KeyError, RecursionError):
            return None

"""The kept-decision API of the store contract (for Explain and Feedback of any
sidecar, after a restart): ``KeptDecisionsMixin`` holds its defaults, those of a
store that keeps none; a backend that keeps decisions overrides all four members.
"""

from __future__ import annotations

from collections.abc import Sequence

from memlineage.lineage.decisions import KeptDecision

__all__ = ["KeptDecisionsMixin"]


class KeptDecisionsMixin:
    """``keeps_decisions`` / ``keep_decisions`` / ``kept_decisions`` / ``kept_decision``
    of ``LineageStore``, as a store that keeps no decision answers them."""

    @property
    def keeps_decisions(self) -> bool:
        """True when `keep_decisions` keeps them (this default: False, it keeps none)."""
        return False

    def keep_decisions(self, namespace: str, entries: Sequence[KeptDecision]) -> None:
        """Keep `entries` (decisions of `namespace`, oldest first) in one round trip /
        one transaction, then only the newest `decision_retention` of the namespace;
        an id kept already is not kept twice. This default keeps none."""
        return None

    def kept_decisions(self, namespace: str, memory_id: str, limit: int) -> list[KeptDecision]:
        """The newest (at most `limit`) kept decisions of `namespace` on `memory_id`,
        newest first. This default: none."""
        return []

    def kept_decision(self, namespace: str, decision_id: str) -> KeptDecision | None:
        """The kept decision `decision_id` of `namespace`, or None. This default: None."""
        return None

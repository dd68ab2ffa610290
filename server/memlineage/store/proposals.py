"""The proposal API of the store contract (`lineage/proposals.py`): save one (with
its Watch event, `proposed` or `objected`, in the same step), read one, drop one.
The governance rules (when to propose, postpone, decide) are the sweep's and the
engine's; the store only keeps them per (namespace, memory)."""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING

from memlineage.lineage.proposals import Proposal

__all__ = ["ProposalsMixin"]


class ProposalsMixin:
    """``save_proposal`` / ``proposal`` / ``drop_proposal`` of ``LineageStore``."""

    if TYPE_CHECKING:

        def _now(self, now: float | None) -> float: ...

        def _ns(self, namespace: str) -> str: ...

    def save_proposal(
        self, proposal: Proposal, event: str | None = None, *, now: float | None = None
    ) -> None:
        """Keep `proposal` (replacing the memory's earlier one) and, with `event`
        (`proposed` or `objected`), append that Watch event in the same step."""
        if event not in (None, "proposed", "objected"):
            raise ValueError(f"event {event!r}")
        self._save_proposal(self._ns(proposal.namespace), proposal, event, self._now(now))

    def proposal(self, namespace: str, memory_id: str) -> Proposal | None:
        return self._proposal(self._ns(namespace), memory_id)

    def drop_proposal(self, namespace: str, memory_id: str) -> None:
        self._drop_proposal(self._ns(namespace), memory_id)

    @abstractmethod
    def _save_proposal(self, ns: str, p: Proposal, event: str | None, now: float) -> None: ...

    @abstractmethod
    def _proposal(self, ns: str, memory_id: str) -> Proposal | None: ...

    @abstractmethod
    def _drop_proposal(self, ns: str, memory_id: str) -> None: ...

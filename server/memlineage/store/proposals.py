"""The proposal API of the store contract (`lineage/proposals.py`): save one (with
its Watch event, `proposed` or `objected`, in the same step), read one, drop one.
The governance rules (when to propose, postpone, decide) are the sweep's and the
engine's; the store only keeps them per (namespace, memory). ``decoded_proposal``
reads a stored one back strictly, for every backend (with the field readers of
``store.grants``)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memlineage.lineage.proposals import PENDING, POSTPONED, Objection, Proposal
from memlineage.store.grants import DecodeProblem, json_fields, number_at, text_at, texts_at

__all__ = ["ProposalsMixin", "decoded_proposal"]


class ProposalsMixin:
    """``save_proposal`` / ``proposal`` / ``proposals`` / ``drop_proposal`` of ``LineageStore``."""

    if TYPE_CHECKING:

        def _now(self, now: float | None) -> float: ...

        def _ns(self, namespace: str) -> str: ...

    def save_proposal(
        self,
        proposal: Proposal,
        event: str | None = None,
        *,
        now: float | None = None,
        replacing: Proposal | None = None,
    ) -> bool:
        """Keep `proposal` (replacing the memory's earlier one) and, with `event`
        (`proposed` or `objected`), append that Watch event in the same step. With
        `replacing`: only if the memory's proposal is still that one (False: it
        changed meanwhile, nothing written), so two owners objecting at once cannot
        both be answered while one objection is lost."""
        if event not in (None, "proposed", "objected"):
            raise ValueError(f"event {event!r}")
        ns = self._ns(proposal.namespace)
        return self._save_proposal(ns, proposal, event, self._now(now), replacing)

    def proposal(self, namespace: str, memory_id: str) -> Proposal | None:
        return self._proposal(self._ns(namespace), memory_id)

    def proposals(self, namespace: str, memory_ids: Sequence[str]) -> dict[str, Proposal]:
        """The proposals of those of `memory_ids` that have one, in one read (a sweep
        batch asks for all of its memories at once). A damaged one is
        ``StoreCorruptError`` as `proposal` raises it (`proposal` then tells which)."""
        return self._proposals(self._ns(namespace), list(dict.fromkeys(memory_ids)))

    def _proposals(self, ns: str, memory_ids: list[str]) -> dict[str, Proposal]:
        """One `_proposal` each: a backend whose read is a round trip overrides it."""
        found = ((i, self._proposal(ns, i)) for i in memory_ids)
        return {i: p for i, p in found if p is not None}

    def drop_proposal(self, namespace: str, memory_id: str) -> None:
        self._drop_proposal(self._ns(namespace), memory_id)

    @abstractmethod
    def _save_proposal(
        self, ns: str, p: Proposal, event: str | None, now: float, replacing: Proposal | None
    ) -> bool: ...

    @abstractmethod
    def _proposal(self, ns: str, memory_id: str) -> Proposal | None: ...

    @abstractmethod
    def _drop_proposal(self, ns: str, memory_id: str) -> None: ...


def decoded_proposal(data: object, namespace: object, memory_id: object) -> Proposal:
    """A stored proposal as `Proposal.to_json` wrote it (field by field, of its type),
    stored under its own namespace and memory, pending or postponed; else
    ``DecodeProblem``."""
    v = json_fields(data, 10, 10)
    if not isinstance(v[9], list):
        raise DecodeProblem(f"field 9 (objections) is not a list: {v[9]!r}")
    objections = []
    for i, o in enumerate(v[9]):
        if not isinstance(o, list) or len(o) != 3:
            raise DecodeProblem(f"objection {i} is not [at, by, reason]: {o!r}")
        objections.append(
            Objection(
                number_at(o, 0, f"objection {i} at"),
                text_at(o, 1, f"objection {i} by"),
                text_at(o, 2, f"objection {i} reason"),
            )
        )
    p = Proposal(
        memory_id=text_at(v, 0, "memory_id"),
        namespace=text_at(v, 1, "namespace"),
        from_status=text_at(v, 2, "from_status"),
        to_status=text_at(v, 3, "to_status"),
        reason=text_at(v, 4, "reason"),
        owners=texts_at(v, 5, "owners"),
        proposed_at=number_at(v, 6, "proposed_at"),
        deadline=number_at(v, 7, "deadline"),
        state=text_at(v, 8, "state"),
        objections=tuple(objections),
    )
    if p.state not in (PENDING, POSTPONED):
        raise DecodeProblem(f"field 8 (state) {p.state!r} is not {PENDING} or {POSTPONED}")
    if p.memory_id != memory_id or p.namespace != namespace:
        raise DecodeProblem(f"holds the memory {p.memory_id!r} of namespace {p.namespace!r}")
    return p

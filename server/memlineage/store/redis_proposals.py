"""Proposals on Redis: ``ml:{ns}:pp`` (memory id -> the proposal's JSON); saving one
and appending its Watch event are one script over the namespace's keys (one slot:
cluster-legal)."""

from __future__ import annotations

from typing import Any

from memlineage.lineage.proposals import Proposal
from memlineage.store.redis_base import RedisBase
from memlineage.store.redis_record_lua import HISTORY

# KEYS: proposals hash, event stream; ARGV: memory id, JSON, event kind ('' none), cap,
# then the event's fields as name, value pairs.
_SAVE = (
    HISTORY
    + """
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] ~= '' then
  local fields = {}
  for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
  emit(KEYS[2], tonumber(ARGV[4]), 't', ARGV[3], unpack(fields))
end
return 1
"""
)

PROPOSAL_SCRIPTS = {"save": _SAVE}


class RedisProposals(RedisBase):
    """Proposals: save with its event, read, drop."""

    _proposal_scripts: dict[str, Any]

    def _save_proposal(self, ns: str, p: Proposal, event: str | None, now: float) -> None:
        fields: list[Any] = []
        if event is not None:
            fields = [
                "m",
                p.memory_id,
                "a",
                repr(now),
                "s",
                p.to_status,
                "f",
                p.from_status,
                "d",
                repr(p.deadline),
            ]
            if event == "proposed":
                fields += ["w", p.reason, "x", " ".join(p.owners)]
            elif p.objections:
                fields += ["r", p.objections[-1].by, "w", p.objections[-1].reason]
        with self._guard():
            self._proposal_scripts["save"](
                keys=[self.keys.proposals(ns), self.keys.events(ns)],
                args=[p.memory_id, p.to_json(), event or "", self._retention, *fields],
            )

    def _proposal(self, ns: str, memory_id: str) -> Proposal | None:
        with self._guard():
            text = self.client.hget(self.keys.proposals(ns), memory_id)
        return Proposal.from_json(text) if text else None

    def _drop_proposal(self, ns: str, memory_id: str) -> None:
        with self._guard():
            self.client.hdel(self.keys.proposals(ns), memory_id)

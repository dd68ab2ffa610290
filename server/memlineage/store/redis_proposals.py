"""Proposals on Redis: ``ml:{ns}:pp`` (memory id -> the proposal's JSON); saving one
and appending its Watch event are one script over the namespace's keys (one slot:
cluster-legal). A read decodes strictly (``store.proposals.decoded_proposal``): a
damaged value is ``StoreCorruptError`` (DATA_LOSS) naming its key and field."""

from __future__ import annotations

from typing import Any

from memlineage.lineage.proposals import Proposal
from memlineage.store.proposals import DecodeProblem, decoded_proposal
from memlineage.store.redis_base import RedisBase
from memlineage.store.redis_grants import corrupt_value
from memlineage.store.redis_record_lua import HISTORY
from memlineage.store.redis_scripts import EXPECT_TYPE

# KEYS: proposals hash, event stream; ARGV: memory id, JSON, event kind ('' none), cap,
# the JSON it must replace ('' any: else 0 and nothing written when the stored one is
# another), then the event's fields as name, value pairs. The type of the keys it
# writes is checked before the first write.
_SAVE = (
    EXPECT_TYPE
    + HISTORY
    + """
ml_expect_type(KEYS[1], 'hash')
if ARGV[3] ~= '' then ml_expect_type(KEYS[2], 'stream') end
if ARGV[5] ~= '' and redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[5] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] ~= '' then
  local fields = {}
  for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
  emit(KEYS[2], tonumber(ARGV[4]), 't', ARGV[3], unpack(fields))
end
return 1
"""
)

PROPOSAL_SCRIPTS = {"save": _SAVE}


class RedisProposals(RedisBase):
    """Proposals: save with its event, read, drop."""

    _proposal_scripts: dict[str, Any]

    def _save_proposal(
        self, ns: str, p: Proposal, event: str | None, now: float, replacing: Proposal | None
    ) -> bool:
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
        keys = [self.keys.proposals(ns), self.keys.events(ns)]
        expected: bytes | str = ""
        if replacing is not None:
            # the bytes stored now, if they decode to `replacing` (a value written by
            # another writer may spell it otherwise: `1` for `1.0`); the script then
            # writes only over those bytes
            with self._guard(keys[0]):
                text = self.client.execute_command("HGET", keys[0], p.memory_id, NEVER_DECODE=True)
            try:
                now_there = decoded_proposal(text, ns, p.memory_id) if text else None
            except DecodeProblem:
                now_there = None
            if now_there != replacing:
                return False
            expected = text
        with self._guard(*keys):
            saved = self._proposal_scripts["save"](
                keys=keys,
                args=[p.memory_id, p.to_json(), event or "", self._retention, expected, *fields],
            )
        return bool(saved)

    def _proposal(self, ns: str, memory_id: str) -> Proposal | None:
        """The memory's proposal, strictly decoded (read as bytes): a damaged value is
        ``StoreCorruptError`` naming its key and field."""
        key = self.keys.proposals(ns)
        with self._guard(key):
            text = self.client.execute_command("HGET", key, memory_id, NEVER_DECODE=True)
        if text is None:
            return None
        try:
            return decoded_proposal(text, ns, memory_id)
        except DecodeProblem as exc:
            raise corrupt_value(key, f"the value of field {memory_id!r} {exc}") from None

    def _proposals(self, ns: str, memory_ids: list[str]) -> dict[str, Proposal]:
        """One HMGET for the batch (a sweep's), each value decoded as `_proposal` does."""
        if not memory_ids:
            return {}
        key = self.keys.proposals(ns)
        with self._guard(key):
            texts = self.client.execute_command("HMGET", key, *memory_ids, NEVER_DECODE=True)
        out: dict[str, Proposal] = {}
        for memory_id, text in zip(memory_ids, texts, strict=True):
            if text is None:
                continue
            try:
                out[memory_id] = decoded_proposal(text, ns, memory_id)
            except DecodeProblem as exc:
                raise corrupt_value(key, f"the value of field {memory_id!r} {exc}") from None
        return out

    def _drop_proposal(self, ns: str, memory_id: str) -> None:
        key = self.keys.proposals(ns)
        with self._guard(key):
            self.client.hdel(key, memory_id)

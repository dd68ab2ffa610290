"""Kept decisions on Redis: the namespace's stream ``ml:{ns}:dec`` and its id index
``ml:{ns}:dix``, with the three scripts over them (KEEP, GET_DECISION,
RECENT_DECISIONS) and the methods that call them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memlineage.lineage.decisions import KeptDecision
from memlineage.store.redis_base import RedisBase
from memlineage.store.redis_scripts import EXPECT_TYPE

_KEEP_CHUNK = 500
"""Decisions per KEEP script call."""

# KEYS: stream, index; ARGV: retention, then (id, " memory ids ", KeptDecision JSON)...
# Both keys' type is checked before the first write.
_KEEP = (
    EXPECT_TYPE
    + """
ml_expect_type(KEYS[1], 'stream')
ml_expect_type(KEYS[2], 'hash')
local n = tonumber(ARGV[1])
for i = 2, #ARGV, 3 do
  if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 0 then
    local eid = redis.call('XADD', KEYS[1], '*', 'i', ARGV[i], 'm', ARGV[i + 1],
                           'd', ARGV[i + 2])
    redis.call('HSET', KEYS[2], ARGV[i], eid)
  end
end
local len = redis.call('XLEN', KEYS[1])
if len > n then
  for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', len - n)) do
    local f = e[2]
    for j = 1, #f, 2 do
      if f[j] == 'i' then redis.call('HDEL', KEYS[2], f[j + 1]) end
    end
  end
  redis.call('XTRIM', KEYS[1], 'MAXLEN', n)
end
return len
"""
)
# KEYS: stream, index; ARGV: decision id. The KeptDecision JSON, or nil.
_GET_DECISION = """
local eid = redis.call('HGET', KEYS[2], ARGV[1])
if not eid then return false end
local e = redis.call('XRANGE', KEYS[1], eid, eid)
if #e == 0 then return false end
local f = e[1][2]
for j = 1, #f, 2 do
  if f[j] == 'd' then return f[j + 1] end
end
return false
"""
# KEYS: stream; ARGV: " memory id ", limit, entries to scan at most, the entry to scan
# back from ("+": the newest; else "(" and the last entry scanned). Returns the JSON
# texts found, newest first, and where to go on ("" when done: the limit reached, or
# the stream's oldest entry scanned).
_RECENT_DECISIONS = """
local want, limit, budget, last = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local out = {}
while budget > 0 do
  local count = math.min(256, budget)
  local chunk = redis.call('XREVRANGE', KEYS[1], last, '-', 'COUNT', count)
  for _, e in ipairs(chunk) do
    local f, m, d = e[2], nil, nil
    for j = 1, #f, 2 do
      if f[j] == 'm' then m = f[j + 1] elseif f[j] == 'd' then d = f[j + 1] end
    end
    if m and d and string.find(m, want, 1, true) then
      out[#out + 1] = d
      if #out >= limit then return {out, ''} end
    end
  end
  if #chunk < count then return {out, ''} end
  budget = budget - #chunk
  last = '(' .. chunk[#chunk][1]
end
return {out, last}
"""

SCAN_PER_CALL = 1_000
"""Stream entries one RECENT_DECISIONS call scans at most (~2 ms of Redis): a memory's
recent decisions are looked for in calls of this many, the newest first, so that an
Explain of a memory with few or no recent decisions does not hold Redis, and every
other client, for the whole scan (10,000 entries, ~22 ms, in one script before)."""


DECISION_SCRIPTS = {
    "keep": _KEEP,
    "get": _GET_DECISION,
    "recent": _RECENT_DECISIONS,
}
"""The scripts ``RedisStore.__init__`` registers as ``_decision_scripts``, by name."""


class RedisDecisions(RedisBase):
    """Kept decisions: keep a batch, read one by id, read a memory's recent ones."""

    @property
    def keeps_decisions(self) -> bool:
        return True

    def keep_decisions(self, namespace: str, entries: Sequence[KeptDecision]) -> None:
        retention = max(1, self.decision_retention)
        entries = entries[-retention:]  # older ones would be trimmed at once
        keys = [self.keys.decisions(namespace), self.keys.decision_index(namespace)]
        script = self._decision_scripts["keep"]
        for start in range(0, len(entries), _KEEP_CHUNK):
            args: list[Any] = [retention]
            for e in entries[start : start + _KEEP_CHUNK]:
                args += (e.decision_id, f" {' '.join(e.memory_ids)} ", e.to_json())
            with self._guard(*keys):
                script(keys=keys, args=args)

    def kept_decisions(self, namespace: str, memory_id: str, limit: int) -> list[KeptDecision]:
        if limit <= 0:
            return []
        key = self.keys.decisions(namespace)
        texts: list[str] = []
        budget, cursor = max(1, self.decision_retention), "+"
        while cursor and budget > 0:  # the newest first, in calls of SCAN_PER_CALL
            step = min(SCAN_PER_CALL, budget)
            with self._guard(key):
                more, cursor = self._decision_scripts["recent"](
                    keys=[key], args=[f" {memory_id} ", limit - len(texts), step, cursor]
                )
            texts += more
            budget -= step
        found = (KeptDecision.from_json(t) for t in texts)
        return [k for k in found if k is not None and memory_id in k.memory_ids]

    def kept_decision(self, namespace: str, decision_id: str) -> KeptDecision | None:
        keys = [self.keys.decisions(namespace), self.keys.decision_index(namespace)]
        with self._guard(*keys):
            text = self._decision_scripts["get"](keys=keys, args=[decision_id])
        return KeptDecision.from_json(text) if text else None

    def decisions_kept(self, namespace: str) -> int:
        """How many decisions the namespace's stream holds (XLEN), for tests."""
        key = self.keys.decisions(namespace)
        with self._guard(key):
            return int(self.client.xlen(key))

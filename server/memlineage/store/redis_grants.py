"""Grants on Redis: ``ml:{ns}:g`` (id -> the grant's JSON, written once) and
``ml:{ns}:gu`` (id -> uses spent). Spending is one script over both keys of one
namespace (one slot, so cluster-legal): every named grant effective, then all
spent, or nothing."""

from __future__ import annotations

from typing import Any

from memlineage.lineage.errors import AlreadyExistsError
from memlineage.lineage.grants import GrantRecord
from memlineage.store.grants import MAX_GRANTS_PER_NAMESPACE
from memlineage.store.redis_base import RedisBase

# KEYS: grants, uses; ARGV: grant id, JSON, the cap. 1 written, 0 the id exists, -1 full.
_PUT = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""
# KEYS: grants, uses; ARGV: now, ids... 1 when every grant was effective and is spent.
# The JSON is `GrantRecord.to_json`: [id, ns, issuer, actions, arguments, source,
# memory_id, uses, used, expires_at, created_at]; `used` lives in KEYS[2].
_USE = """
local now = tonumber(ARGV[1])
for i = 2, #ARGV do
  local text = redis.call('HGET', KEYS[1], ARGV[i])
  if not text then return 0 end
  local g = cjson.decode(text)
  local used = tonumber(redis.call('HGET', KEYS[2], ARGV[i]) or '0')
  if string.match(g[3], '^([^:]*)') ~= 'user' then return 0 end
  if used >= g[8] then return 0 end
  if g[11] > now then return 0 end
  if g[10] ~= cjson.null and now >= g[10] then return 0 end
end
for i = 2, #ARGV do redis.call('HINCRBY', KEYS[2], ARGV[i], 1) end
return 1
"""

GRANT_SCRIPTS = {"put": _PUT, "use": _USE}
"""The scripts ``RedisStore.__init__`` registers as ``_grant_scripts``, by name."""


class RedisGrants(RedisBase):
    """Grants: write one, read a namespace's, spend uses atomically."""

    _grant_scripts: dict[str, Any]

    def _grant_keys(self, namespace: str) -> list[str]:
        return [self.keys.grants(namespace), self.keys.grant_uses(namespace)]

    def _put_grant(self, grant: GrantRecord, now: float) -> None:
        with self._guard():
            done = self._grant_scripts["put"](
                keys=self._grant_keys(grant.namespace),
                args=[grant.id, grant.to_json(), MAX_GRANTS_PER_NAMESPACE],
            )
        if int(done) == 0:
            raise AlreadyExistsError(f"grant {grant.id!r} exists in {grant.namespace!r}")
        if int(done) < 0:
            raise AlreadyExistsError(
                f"namespace {grant.namespace!r} holds {MAX_GRANTS_PER_NAMESPACE} grants"
            )

    def _grants(self, namespace: str) -> list[GrantRecord]:
        keys = self._grant_keys(namespace)
        with self._guard():
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(keys[0])
            pipe.hgetall(keys[1])
            texts, uses = pipe.execute()
        out = []
        for gid, text in texts.items():
            g = GrantRecord.from_json(text)
            used = int(uses.get(gid, 0))
            out.append(GrantRecord(**{**_fields(g), "used": used}))
        return sorted(out, key=lambda g: (g.created_at, g.id))

    def _use_grants(self, namespace: str, ids: list[str], now: float) -> bool:
        with self._guard():
            done = self._grant_scripts["use"](keys=self._grant_keys(namespace), args=[now, *ids])
        return int(done) == 1


def _fields(g: GrantRecord) -> dict[str, Any]:
    return {name: getattr(g, name) for name in GrantRecord.__dataclass_fields__}

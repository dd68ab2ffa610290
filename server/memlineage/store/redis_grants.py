"""Grants on Redis: ``ml:{ns}:g`` (id -> the grant's JSON, written once) and
``ml:{ns}:gu`` (id -> uses spent). Spending is one script over both keys of one
namespace (one slot, so cluster-legal): every named grant effective, then all
spent, or nothing. Reads decode strictly (``store.grants.decoded_grant``): a damaged
value is ``StoreCorruptError`` (DATA_LOSS) naming its key and field. A namespace
holds at most ``max_grants``: the put script drops inert ones to make room, in the
same step, or refuses."""

from __future__ import annotations

from typing import Any

import redis.exceptions as rex

from memlineage.lineage.errors import AlreadyExistsError, GrantLimitError, StoreCorruptError
from memlineage.lineage.grants import GrantRecord
from memlineage.store.grants import DecodeProblem, decoded_grant
from memlineage.store.redis_base import RedisBase
from memlineage.store.redis_scripts import EXPECT_TYPE

REDIS_REMEDY = "nothing was changed (write the value again, or HDEL the field to drop it)"
"""The end of a ``StoreCorruptError`` for a value the Redis store cannot read."""

# KEYS: grants, uses; ARGV: grant id, JSON, the cap, now. 1 written, 0 the id exists,
# -1 full and too few grants inert to make room (nothing changed). When the namespace
# holds the cap, the grants not effective at `now` (as _USE decides it) are dropped,
# oldest first (created_at, id), as many as one more needs, both hashes' fields, in
# the same step as the write; every grant and count read is checked before the first
# write (ML_CORRUPT <key> <field>: the caller names it), and so is both keys' type.
_PUT = (
    EXPECT_TYPE
    + """
ml_expect_type(KEYS[1], 'hash')
ml_expect_type(KEYS[2], 'hash')
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
local held = redis.call('HLEN', KEYS[1])
local excess = held - tonumber(ARGV[3]) + 1
if excess > 0 then
  local now = tonumber(ARGV[4])
  local texts = redis.call('HGETALL', KEYS[1])
  local counts = redis.call('HGETALL', KEYS[2])
  local spent = {}
  for i = 1, #counts, 2 do spent[counts[i]] = counts[i + 1] end
  local inert = {}
  for i = 1, #texts, 2 do
    local id = texts[i]
    local ok, g = pcall(cjson.decode, texts[i + 1])
    if not ok or type(g) ~= 'table' or type(g[3]) ~= 'string' or type(g[8]) ~= 'number'
        or type(g[11]) ~= 'number' or (g[10] ~= cjson.null and type(g[10]) ~= 'number') then
      error('ML_CORRUPT ' .. KEYS[1] .. ' ' .. id)
    end
    local u = spent[id] or '0'
    if not string.find(u, '^%d+$') or #u > 20 then error('ML_CORRUPT ' .. KEYS[2] .. ' ' .. id) end
    local used = tonumber(u)
    if used > g[8] then error('ML_CORRUPT ' .. KEYS[2] .. ' ' .. id) end
    if string.match(g[3], '^([^:]*)') ~= 'user' or used >= g[8] or g[11] > now
        or (g[10] ~= cjson.null and now >= g[10]) then
      inert[#inert + 1] = {g[11], id}
    end
  end
  if #inert < excess then return -1 end
  table.sort(inert, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  for j = 1, excess do
    redis.call('HDEL', KEYS[1], inert[j][2])
    redis.call('HDEL', KEYS[2], inert[j][2])
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""
)
# KEYS: grants, uses; ARGV: now, ids... 1 when every grant was effective and is spent.
# The JSON is `GrantRecord.to_json`: [id, ns, issuer, actions, arguments, source,
# memory_id, uses, used, expires_at, created_at]; `used` lives in KEYS[2]. Both keys'
# type is checked first.
_USE = (
    EXPECT_TYPE
    + """
ml_expect_type(KEYS[1], 'hash')
ml_expect_type(KEYS[2], 'hash')
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
)

GRANT_SCRIPTS = {"put": _PUT, "use": _USE}
"""The scripts ``RedisStore.__init__`` registers as ``_grant_scripts``, by name."""


class RedisGrants(RedisBase):
    """Grants: write one, read a namespace's, spend uses atomically."""

    _grant_scripts: dict[str, Any]
    max_grants: int
    """The grants a namespace holds at most (``RedisStore``'s ``max_grants``)."""

    def _grant_keys(self, namespace: str) -> list[str]:
        return [self.keys.grants(namespace), self.keys.grant_uses(namespace)]

    def _put_grant(self, grant: GrantRecord, now: float) -> None:
        """The put script: at the cap it makes room by dropping inert grants, oldest
        first, or refuses (``GrantLimitError``) when too few are; a damaged grant or
        count it reads is ``StoreCorruptError`` naming it, and nothing was changed."""
        keys = self._grant_keys(grant.namespace)
        try:
            with self._guard(*keys):
                done = self._grant_scripts["put"](
                    keys=keys, args=[grant.id, grant.to_json(), self.max_grants, now]
                )
        except rex.ResponseError as exc:
            if "user_script" not in str(exc):  # not the script's own error
                raise
            raise self._unreadable_grants(
                grant.namespace, keys, f"making room for {grant.id!r}", exc
            ) from None
        if int(done) == 0:
            raise AlreadyExistsError(f"grant {grant.id!r} exists in {grant.namespace!r}")
        if int(done) < 0:
            raise GrantLimitError(grant.namespace, self.max_grants)

    def _grants(self, namespace: str) -> list[GrantRecord]:
        """Every grant, strictly decoded (read as bytes, so a value that is not UTF-8
        is named too): a damaged value is ``StoreCorruptError`` naming its key and
        field, and nothing is read of the namespace's grants."""
        keys = self._grant_keys(namespace)
        with self._guard(*keys):
            pipe = self.client.pipeline(transaction=False)
            pipe.execute_command("HGETALL", keys[0], NEVER_DECODE=True)
            pipe.execute_command("HGETALL", keys[1], NEVER_DECODE=True)
            texts, uses = pipe.execute()
        out = []
        for raw_id, text in texts.items():
            gid = _field_name(keys[0], raw_id)
            try:
                g = decoded_grant(text, namespace, gid)
            except DecodeProblem as exc:
                raise corrupt_value(keys[0], f"the value of field {gid!r} {exc}") from None
            used = _used(keys[1], gid, uses.get(raw_id), g.uses)
            out.append(GrantRecord(**{**_fields(g), "used": used}))
        return sorted(out, key=lambda g: (g.created_at, g.id))

    def _use_grants(self, namespace: str, ids: list[str], now: float) -> bool:
        """The spend script; a Lua error it meets on a damaged value (a grant that is
        not JSON or not of its types, a count that is not a number: damaged since the
        act read the grants) is ``StoreCorruptError`` naming the key and field, and
        nothing was spent (the script errs before its first write)."""
        keys = self._grant_keys(namespace)
        try:
            with self._guard(*keys):
                args = [now, *ids]
                script = self._grant_scripts["use"]
                done = (
                    self._replicated(script, keys, args)
                    if self.wait_replicas
                    else script(keys=keys, args=args)
                )
        except rex.ResponseError as exc:
            if "user_script" not in str(exc):  # not the script's own error
                raise
            spending = f"spending {', '.join(map(repr, ids))}"
            raise self._unreadable_grants(namespace, keys, spending, exc) from None
        return int(done) == 1

    def _unreadable_grants(
        self, namespace: str, keys: list[str], doing: str, exc: Exception
    ) -> StoreCorruptError:
        """The value a grant script could not read: the strict read of the grants
        names it; when it reads them all (mended since), the script's error."""
        try:
            self._grants(namespace)
        except StoreCorruptError as found:
            return found
        return corrupt_value(keys[0], f"{doing} met a value the script cannot read ({exc})")


def _fields(g: GrantRecord) -> dict[str, Any]:
    return {name: getattr(g, name) for name in GrantRecord.__dataclass_fields__}


def corrupt_value(key: str, problem: str) -> StoreCorruptError:
    return StoreCorruptError(key, problem, store="redis", remedy=REDIS_REMEDY)


def _field_name(key: str, raw: bytes) -> str:
    """A hash field's name as the store wrote it (an id: UTF-8)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise corrupt_value(key, f"the field name {raw!r} is not UTF-8 ({exc})") from None


def _used(key: str, gid: str, raw: bytes | None, uses: int) -> int:
    """The uses spent (``HINCRBY``'s decimal integer, absent: none), within `uses`."""
    if raw is None:
        return 0
    if not raw.isdigit() or len(raw) > 20:
        raise corrupt_value(key, f"the value of field {gid!r} is not a count of uses: {raw!r}")
    used = int(raw)
    if used > uses:
        problem = f"the value of field {gid!r} is {used}, over the grant's uses {uses}"
        raise corrupt_value(key, problem)
    return used

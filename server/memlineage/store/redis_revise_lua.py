"""The Redis store's REVISE script: one revision of a memory, all or nothing (see
``redis_revise``); a module of its own, as RECORD is (``redis_record_lua``)."""

from __future__ import annotations

from memlineage.store.redis_record_lua import HISTORY

REVISE = (
    HISTORY
    + """
-- One revision, all or nothing: the compare-and-set on the version, the graph epoch the
-- caller's cycle check read, the new dependencies' existence; the version replaced kept
-- (its hash as JSON, pushed on the memory's versions list); the new fields; the derivation
-- links moved (added dependencies gain the id, removed ones lose it); the status worked
-- out again (pending_verification on a tainted dependency, else active); the epoch bumped
-- (the memory's ancestors changed); the review rescheduled; an "updated" event; and the
-- cascade over every descendant (all passed in KEYS: the script names any missing and
-- the caller retries with them) with one "cascaded" event.
-- Every stored number it adds to is checked before its first write (ML_CORRUPT <key>
-- <field>, redis_scripts): the memory's version, the graph epoch, the version of every
-- descendant the cascade marks (the write counter: the counted head); so is the type of
-- every key it writes (ml_expect_type).
-- KEYS[1] record hash   KEYS[2] history list   KEYS[3] derivation list of the memory
-- KEYS[4] graph epoch   KEYS[5] event stream   KEYS[6] review schedule zset
-- KEYS[7] versions list of the memory
-- KEYS[7+i]          record hash of dependency i              (i = 1..n)
-- KEYS[7+n+j]        derivation list of added dependency j    (j = 1..a)
-- KEYS[7+n+a+j]      derivation list of removed dependency j  (j = 1..r)
-- KEYS[7+n+a+r+3k-2 .. +3k] record hash, derivation list, history list of descendant k
-- ARGV[1] id   ARGV[2] expected version   ARGV[3] epoch seen ("" unset; "*" when no
-- dependency is added: no cycle to close, so no check to keep)   ARGV[4] n
-- ARGV[5] a   ARGV[6] r   ARGV[7] c = descendants passed   ARGV[8] now   ARGV[9] history cap
-- ARGV[10] event retention   ARGV[11] " tainted statuses "   ARGV[12] " statuses a cascade
-- marks "   ARGV[13] cascade reason   ARGV[14] reason of the updated event
-- ARGV[15] next review time   ARGV[16] fields to delete (space-separated)   ARGV[17] m
-- ARGV[18 .. 17+m] field, value pairs to set   ARGV[18+m .. 17+m+n] dependency ids
-- ARGV[18+m+n .. 17+m+n+c] descendant ids (KEYS order)
-- Returns {1, new status, new version, {ids marked}} | {0, "NOTFOUND", ""}
--       | {0, "VERSION", actual} | {0, "RETRY", ""} (the graph changed: check again)
--       | {0, "NODEP", i-1} | {0, "CLOSURE", {descendants missing}}
local n = tonumber(ARGV[4])
local a = tonumber(ARGV[5])
local r = tonumber(ARGV[6])
local c = tonumber(ARGV[7])
local m = tonumber(ARGV[17])
local F = 17
local D0 = 7 + n + a + r
local id = ARGV[1]
local cap = tonumber(ARGV[9])
local version = ml_int(KEYS[1], 'V')
if not version then return {0, 'NOTFOUND', ''} end
if version ~= ARGV[2] then return {0, 'VERSION', version} end
local epoch = redis.call('GET', KEYS[4])
if ARGV[3] ~= '*' and (epoch or '') ~= ARGV[3] then return {0, 'RETRY', ''} end
if epoch and not ml_is_int(epoch) then ml_corrupt(KEYS[4], '') end
local taint_i = nil
local taint_st = nil
for i = 1, n do
  local st = redis.call('HGET', KEYS[7 + i], 'S')
  if not st then return {0, 'NODEP', tostring(i - 1)} end
  if not taint_i and string.find(ARGV[11], ' ' .. st .. ' ', 1, true) then
    taint_i = i
    taint_st = st
  end
end
local node = {}
-- The descendants' S and V as the walk below read them, by KEYS index: the cascade
-- marks from these (nothing before it writes S or V of a descendant).
for k = 1, c do node[ARGV[F + m + n + k]] = D0 + 3 * k - 2 end
local held, missing = ml_closure(node, id, KEYS[3], ARGV[12])
if #missing > 0 then return {0, 'CLOSURE', missing} end
-- The keys first touched after the first write hold their type or nothing (the others
-- are read before it: a key of another type fails that read, before any write).
ml_expect_type(KEYS[2], 'list')
ml_expect_type(KEYS[5], 'stream')
ml_expect_type(KEYS[6], 'zset')
ml_expect_type(KEYS[7], 'list')
for j = 8 + n, D0 do ml_expect_type(KEYS[j], 'list') end
for k = 1, c do ml_expect_type(KEYS[D0 + 3 * k], 'list') end
-- Everything checked: write.
redis.call('RPUSH', KEYS[7], cjson.encode(redis.call('HGETALL', KEYS[1])))
local was = redis.call('HGET', KEYS[1], 'S')
if m > 0 then redis.call('HSET', KEYS[1], unpack(ARGV, F + 1, F + m)) end
for f in string.gmatch(ARGV[16], '%S+') do redis.call('HDEL', KEYS[1], f) end
for j = 1, a do redis.call('RPUSH', KEYS[7 + n + j], id) end
for j = 1, r do redis.call('LREM', KEYS[7 + n + a + j], 0, id) end
local status = 'active'
local root = ''
if taint_i then
  status = 'pending_verification'
  root = ARGV[F + m + taint_i]
end
if status ~= was then
  local why = 'revised'
  local by = id
  if taint_i then
    why = 'dependency ' .. taint_st
    by = root
  end
  push_history(KEYS[2], ARGV[8] .. US .. was .. US .. status .. US .. why .. US .. by, cap)
end
local new_version = tonumber(version) + 1
redis.call('HSET', KEYS[1], 'S', status, 'V', new_version)
redis.call('INCR', KEYS[4])
redis.call('ZADD', KEYS[6], ARGV[15], id)
local deps = {}
for i = 1, n do deps[i] = ARGV[F + m + i] end
emit(KEYS[5], ARGV[10], 't', 'updated', 'm', id, 'a', ARGV[8], 's', status, 'f', was,
  'w', ARGV[14], 'r', root, 'x', table.concat(deps, ' '), 'v', tostring(new_version))
-- The cascade, as CASCADE_MARK does it, over every descendant at once.
local marked = {}
local tail = US .. 'pending_verification' .. US .. ARGV[13] .. US .. id
local seen = {[id] = true}
local queue = redis.call('LRANGE', KEYS[3], 0, -1)
local head = 1
while head <= #queue do
  local kid = queue[head]
  head = head + 1
  local at = node[kid]
  if not seen[kid] and at then
    seen[kid] = true
    local sv = held[at] or redis.call('HMGET', KEYS[at], 'S', 'V')
    if sv[1] and string.find(ARGV[12], ' ' .. sv[1] .. ' ', 1, true) then
      redis.call('HSET', KEYS[at], 'S', 'pending_verification', 'V', tonumber(sv[2]) + 1)
      ml_revive(KEYS[at], sv[1], 'pending_verification')
      push_history(KEYS[at + 2], ARGV[8] .. US .. sv[1] .. tail, cap)
      marked[#marked + 1] = kid
    end
    local kids = redis.call('LRANGE', KEYS[at + 1], 0, -1)
    for j = 1, #kids do queue[#queue + 1] = kids[j] end
  end
end
if #marked > 0 then
  emit(KEYS[5], ARGV[10], 't', 'cascaded', 'm', id, 'a', ARGV[8], 'r', id, 's', status,
    'w', ARGV[13], 'x', table.concat(marked, ' '))
end
return {1, status, new_version, marked}
"""
)

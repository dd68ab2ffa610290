"""The Redis store's RECORD script (one Record, all or nothing) and the Lua helpers
every writing script starts with (history entries, lineage events): a module of
their own because RECORD is a third of all the Lua; `redis_scripts` assembles the
set (its docstring has the conventions every script follows)."""

from __future__ import annotations

HISTORY = """
local function push_history(key, entry, cap)
  if redis.call('RPUSH', key, entry) > cap then redis.call('LTRIM', key, -cap, -1) end
end
local US = '\\31'
local function emit(key, cap, ...)
  local last = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)
  local prev = '0-0'
  if last[1] then prev = last[1][1] end
  return redis.call('XADD', key, 'MAXLEN', '~', cap, '*', 'p', prev, ...)
end
"""

RECORD = (
    HISTORY
    + """
-- One Record, all or nothing: the record with its derivation links, claim index and
-- claim group entries, its confirmations/contradictions of the claim group and its first
-- review; the supersession of the claim's old holder with the cascade it starts (every
-- descendant passed in KEYS: the script refuses when the caller's closure is short); one
-- event of the rate counter; the digest of the proposal and the outcome, kept with the
-- record so that an identical retry answers the same outcome and writes nothing.
-- Every stored number it adds to is checked before its first write (ML_CORRUPT <key>
-- <field>, redis_scripts): the source statistics of the claim group's comparison, the
-- holder's version, the version of every descendant the cascade marks (the write
-- counter: the counted head); so is the type of every key it writes (ml_expect_type).
-- KEYS[1]            record hash of the new memory
-- KEYS[2]            history list of the new memory
-- KEYS[3]            claim key (KEYS[1] again when the memory asserts no claim)
-- KEYS[4]            event stream of the namespace
-- KEYS[5]            claim group set (KEYS[1] again when no claim)
-- KEYS[6]            source statistics hash of the namespace
-- KEYS[7]            review schedule zset of the namespace
-- KEYS[8]            rate counter zset (KEYS[1] again when none)
-- KEYS[9..11]        record hash, derivation list, history list of the holder to
--                    supersede (KEYS[1] again when none)
-- KEYS[12]           claim peers hash (KEYS[1] again when no claim)
-- KEYS[12+i]         record hash of dependency i            (i = 1..n)
-- KEYS[12+n+i]       derivation list of dependency i        (i = 1..n)
-- KEYS[12+2n+j]      record hash of member j: of the claim's peers, or of its whole
--                    group when ARGV[27] is "1"             (j = 1..g)
-- KEYS[12+2n+g+3k-2 .. +3k] record hash, derivation list, history list of descendant k
--                    of the holder to supersede             (k = 1..c)
-- ARGV[1] id    ARGV[2] n    ARGV[3] "1" if a claim    ARGV[4] " tainted statuses "
-- ARGV[5] now   ARGV[6] history cap   ARGV[7] m = number of field/value items
-- ARGV[8] event retention   ARGV[9] g = members the caller read
-- ARGV[10] first review time   ARGV[11] creator id   ARGV[12] "1" if a value
-- ARGV[13] value (or "")   ARGV[14] digest of the proposal
-- ARGV[15] "1" to check the claim holder   ARGV[16] the holder expected ("" none)
-- ARGV[17] id of the holder to supersede or ""   ARGV[18] " statuses that may become
-- superseded "   ARGV[19] " statuses a cascade marks "   ARGV[20] supersede reason
-- ARGV[21] cascade reason   ARGV[22] "1" to count   ARGV[23] counter member
-- ARGV[24] counter cutoff   ARGV[25] counter TTL (ms)   ARGV[26] c = descendants passed
-- ARGV[27] "1": the members are the claim's whole group (its peers hash is rebuilt from
--          their statuses), "0": its peers hash (members no longer live are dropped)
-- ARGV[28 .. 27+m]    field, value, field, value ...   (includes S = requested status)
-- ARGV[28+m .. 27+m+n] dependency ids
-- ARGV[28+m+n .. 27+m+n+c] descendant ids (KEYS order)
-- The peers hash holds the members a new claim compares with (those live when last
-- seen) and, in field "~", the claim revivals counter (ml_revivals) when it was last
-- made whole: a different value now means a member may have come back since, and the
-- caller is sent to read the whole group.
-- Returns {1, final status, previous claim holder or "", confirmed_by, contradicted_by,
--          superseded id or "", {affected ids}}
--       | {2, "REPLAY", superseded id or "", affected ids (space-separated)} when the
--         id exists with the same digest (nothing written)
--       | {0, "EXISTS", ""} | {0, "NODEP", i-1}
--       | {0, "RETRY", current members, "1" whole group | "0" peers} when the members
--         are no longer those read, or the peers hash is not whole (retry with these)
--       | {0, "HOLDER", current holder or ""} the claim moved: decide again
--       | {0, "TRANSITION", status} the holder cannot be superseded from its status
--       | {0, "CLOSURE", {descendants missing}} (the caller retries with them)
local n = tonumber(ARGV[2])
local m = tonumber(ARGV[7])
local g = tonumber(ARGV[9])
local c = tonumber(ARGV[26])
local F = 27
local B = 12
local D0 = B + 2 * n + g
local new_id = ARGV[1]
if ml_expect_type(KEYS[1], 'hash') then
  local kept = redis.call('HMGET', KEYS[1], 'D', 'R', 'A')
  if kept[1] and kept[1] == ARGV[14] then
    return {2, 'REPLAY', kept[2] or '', kept[3] or ''}
  end
  return {0, 'EXISTS', ''}
end
-- The keys first touched after the first write hold their type or nothing (the others
-- are read before it: a key of another type fails that read, before any write).
ml_expect_type(KEYS[2], 'list')
ml_expect_type(KEYS[4], 'stream')
ml_expect_type(KEYS[7], 'zset')
if ARGV[22] == '1' then ml_expect_type(KEYS[8], 'zset') end
if ARGV[17] ~= '' then ml_expect_type(KEYS[11], 'list') end
if ARGV[3] == '1' then
  ml_expect_type(KEYS[5], 'set')
  ml_expect_type(KEYS[12], 'hash')
end
for i = 1, n do ml_expect_type(KEYS[B + n + i], 'list') end
for k = 1, c do ml_expect_type(KEYS[D0 + 3 * k], 'list') end
local taint_i = nil
local taint_st = nil
for i = 1, n do
  local st = redis.call('HGET', KEYS[B + i], 'S')
  if not st then return {0, 'NODEP', tostring(i - 1)} end
  if not taint_i and string.find(ARGV[4], ' ' .. st .. ' ', 1, true) then
    taint_i = i
    taint_st = st
  end
end
-- The members read must still be the claim's: a group only ever grows (the same size
-- is the same members); a peers hash must be whole (its "~") and hold exactly them.
local skip = #KEYS[1] - #new_id + 1  -- a record key is a prefix, then the id
local function peer_ids()
  local ids = {}
  for _, f in ipairs(redis.call('HKEYS', KEYS[12])) do
    if f ~= '~' then ids[#ids + 1] = f end
  end
  return ids
end
if ARGV[3] == '1' then
  if ARGV[27] == '1' then
    if redis.call('SCARD', KEYS[5]) ~= g then
      return {0, 'RETRY', redis.call('SMEMBERS', KEYS[5]), '1'}
    end
  else
    if redis.call('HGET', KEYS[12], '~') ~= ml_revivals_now then
      return {0, 'RETRY', redis.call('SMEMBERS', KEYS[5]), '1'}
    end
    local same = redis.call('HLEN', KEYS[12]) == g + 1
    for j = 1, g do
      if not same then break end
      local id = string.sub(KEYS[B + 2 * n + j], skip)
      same = redis.call('HEXISTS', KEYS[12], id) == 1
    end
    if not same then return {0, 'RETRY', peer_ids(), '0'} end
  end
end
local previous = ''
if ARGV[3] == '1' then previous = redis.call('GET', KEYS[3]) or '' end
if ARGV[3] == '1' and ARGV[15] == '1' and previous ~= ARGV[16] then
  return {0, 'HOLDER', previous}
end
local old = ARGV[17]
local old_st = nil
local node = {}
-- The descendants' S and V as the walk below read them, by KEYS index: the cascade
-- marks from these (nothing before it writes S or V of a descendant).
local held = {}
if old ~= '' then
  local hv = redis.call('HMGET', KEYS[9], 'S', 'V')
  old_st = hv[1]
  if hv[2] and not ml_is_int(hv[2]) then ml_corrupt(KEYS[9], 'V') end
  if not old_st or not string.find(ARGV[18], ' ' .. old_st .. ' ', 1, true) then
    return {0, 'TRANSITION', old_st or ''}
  end
  -- Every descendant of the holder must be in KEYS: walk the derivation lists.
  for k = 1, c do node[ARGV[F + m + n + k]] = D0 + 3 * k - 2 end
  local missing
  held, missing = ml_closure(node, old, KEYS[10], ARGV[19])
  if #missing > 0 then return {0, 'CLOSURE', missing} end
end
local fields = {}
local status = 'active'
for j = F + 1, F + m, 2 do
  fields[#fields + 1] = ARGV[j]
  fields[#fields + 1] = ARGV[j + 1]
  if ARGV[j] == 'S' then status = ARGV[j + 1] end
end
-- Confirmations and contradictions against the live members of other sources.
local cx = ARGV[11]
local mine = {y = {}, z = {}}
local seen_src = {y = {}, z = {}}
local incr = {}
local incr_order = {}
local marks = {}  -- {key, field, value}: the members' y/z, written once the counts are checked
local function count(field)
  if not incr[field] then
    incr[field] = 0
    incr_order[#incr_order + 1] = field
  end
  incr[field] = incr[field] + 1
end
local live, gone = {}, {}  -- the members by status: the peers hash keeps the live ones
for j = 1, g do
  local key = KEYS[B + 2 * n + j]
  local y = redis.call('HMGET', key, 'S', 'c', 'v', 'y', 'z')
  local alive = y[1] == 'active' or y[1] == 'pending_verification'
  if alive then
    live[#live + 1] = string.sub(key, skip)
  else
    gone[#gone + 1] = string.sub(key, skip)
  end
  if alive and y[2] ~= cx then
    local same
    if ARGV[12] == '1' then same = (y[3] == ARGV[13]) else same = (y[3] == false) end
    local f, idx, suffix = 'z', 5, '|bad'
    if same then f, idx, suffix = 'y', 4, '|ok' end
    local theirs = y[idx]
    if not theirs then
      marks[#marks + 1] = {key, f, cx}
    elseif not string.find(' ' .. theirs .. ' ', ' ' .. cx .. ' ', 1, true) then
      marks[#marks + 1] = {key, f, theirs .. ' ' .. cx}
    end
    if not seen_src[f][y[2]] then
      seen_src[f][y[2]] = true
      mine[f][#mine[f] + 1] = y[2]
    end
    count(cx .. suffix)
    count(y[2] .. suffix)
  end
end
-- read in slices: Lua's unpack stops at ~8,000 values (a claim whose peers come from
-- that many sources answered "too many results to unpack" to every later Record)
for first = 1, #incr_order, 1000 do
  local part = {}
  for i = first, math.min(first + 999, #incr_order) do part[#part + 1] = incr_order[i] end
  local stats = redis.call('HMGET', KEYS[6], unpack(part))
  for i, f in ipairs(part) do
    if stats[i] and not ml_is_float(stats[i]) then ml_corrupt(KEYS[6], f) end
  end
end
-- Everything checked: write.
for _, w in ipairs(marks) do redis.call('HSET', w[1], w[2], w[3]) end
for _, f in ipairs(incr_order) do redis.call('HINCRBYFLOAT', KEYS[6], f, incr[f]) end
table.sort(mine.y)
table.sort(mine.z)
local confirmed = table.concat(mine.y, ' ')
local contradicted = table.concat(mine.z, ' ')
if confirmed ~= '' then
  fields[#fields + 1] = 'y'
  fields[#fields + 1] = confirmed
end
if contradicted ~= '' then
  fields[#fields + 1] = 'z'
  fields[#fields + 1] = contradicted
end
local tainted = false
if taint_i and status == 'active' then
  tainted = true
  for j = 1, #fields, 2 do
    if fields[j] == 'S' then fields[j + 1] = 'pending_verification' end
  end
  push_history(KEYS[2], ARGV[5] .. US .. 'active' .. US .. 'pending_verification' .. US ..
    'dependency ' .. taint_st .. US .. ARGV[F + m + taint_i], tonumber(ARGV[6]))
  status = 'pending_verification'
end
fields[#fields + 1] = 'D'
fields[#fields + 1] = ARGV[14]
redis.call('HSET', KEYS[1], unpack(fields))
local deps = {}
for i = 1, n do
  redis.call('RPUSH', KEYS[B + n + i], new_id)
  deps[i] = ARGV[F + m + i]
end
if ARGV[3] == '1' then
  redis.call('SET', KEYS[3], new_id)
  redis.call('SADD', KEYS[5], new_id)
  -- in slices, as above: unpack's limit
  if ARGV[27] == '1' then
    redis.call('DEL', KEYS[12])
    for first = 1, #live, 1000 do
      local part = {}
      for i = first, math.min(first + 999, #live) do
        part[#part + 1] = live[i]
        part[#part + 1] = '1'
      end
      redis.call('HSET', KEYS[12], unpack(part))
    end
  else
    for first = 1, #gone, 1000 do
      redis.call('HDEL', KEYS[12], unpack(gone, first, math.min(first + 999, #gone)))
    end
  end
  -- the counter as read before this script's own cascade (a member it brings back is
  -- then found by the next Record, which reads the whole group)
  redis.call('HSET', KEYS[12], new_id, '1', '~', ml_revivals_now)
end
redis.call('ZADD', KEYS[7], ARGV[10], new_id)
if tainted then
  emit(KEYS[4], ARGV[8], 't', 'recorded', 'm', new_id, 'a', ARGV[5], 's', status, 'v', '1',
    'x', table.concat(deps, ' '), 'r', ARGV[F + m + taint_i], 'w', 'dependency ' .. taint_st)
else
  emit(KEYS[4], ARGV[8], 't', 'recorded', 'm', new_id, 'a', ARGV[5], 's', status, 'v', '1',
    'x', table.concat(deps, ' '))
end
if ARGV[22] == '1' then
  redis.call('ZADD', KEYS[8], ARGV[5], ARGV[23])
  redis.call('ZREMRANGEBYSCORE', KEYS[8], '-inf', '(' .. ARGV[24])
  redis.call('PEXPIRE', KEYS[8], ARGV[25])
end
local marked = {}
if old ~= '' then
  -- The supersession, as SET_STATUS does it (the claim already points at the new id).
  redis.call('HSET', KEYS[9], 'S', 'superseded', 'u', new_id)
  local v = redis.call('HINCRBY', KEYS[9], 'V', 1)
  local cap = tonumber(ARGV[6])
  push_history(KEYS[11], ARGV[5] .. US .. old_st .. US .. 'superseded' .. US .. ARGV[20] ..
    US .. old, cap)
  emit(KEYS[4], ARGV[8], 't', 'status_changed', 'm', old, 'a', ARGV[5], 's', 'superseded',
    'f', old_st, 'w', ARGV[20], 'u', new_id, 'v', tostring(v))
  -- The cascade, as CASCADE_MARK does it, over every descendant at once (the new
  -- memory among them when it was derived from the holder's lineage).
  node[new_id] = 0
  local tail = US .. 'pending_verification' .. US .. ARGV[21] .. US .. old
  local seen = {[old] = true}
  local queue = redis.call('LRANGE', KEYS[10], 0, -1)
  local head = 1
  while head <= #queue do
    local id = queue[head]
    head = head + 1
    local at = node[id]
    if not seen[id] and at then
      seen[id] = true
      local mkey, hkey = KEYS[1], KEYS[2]
      if at ~= 0 then mkey, hkey = KEYS[at], KEYS[at + 2] end
      local sv = held[at] or redis.call('HMGET', mkey, 'S', 'V')
      if sv[1] and string.find(ARGV[19], ' ' .. sv[1] .. ' ', 1, true) then
        redis.call('HSET', mkey, 'S', 'pending_verification', 'V', tonumber(sv[2]) + 1)
        ml_revive(mkey, sv[1], 'pending_verification')
        push_history(hkey, ARGV[5] .. US .. sv[1] .. tail, cap)
        marked[#marked + 1] = id
        if id == new_id then status = 'pending_verification' end
      end
      if at ~= 0 then
        local kids = redis.call('LRANGE', KEYS[at + 1], 0, -1)
        for j = 1, #kids do queue[#queue + 1] = kids[j] end
      end
    end
  end
  if #marked > 0 then
    emit(KEYS[4], ARGV[8], 't', 'cascaded', 'm', old, 'a', ARGV[5], 'r', old,
      's', 'superseded', 'w', ARGV[21], 'x', table.concat(marked, ' '))
  end
  redis.call('HSET', KEYS[1], 'R', old)
  if #marked > 0 then redis.call('HSET', KEYS[1], 'A', table.concat(marked, ' ')) end
end
return {1, status, previous, confirmed, contradicted, old, marked}
"""
)

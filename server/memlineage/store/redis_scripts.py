"""Lua scripts of the Redis store, one constant each.

Every key a script touches arrives through KEYS (built by redis_keys), never
built inside Lua, so the scripts are legal on Redis Cluster (all keys of one
namespace share a hash tag).  Scripts report domain failures as a table
``{0, code, detail}`` rather than a Redis error, and success as ``{1, ...}``;
they check everything before writing anything, so a failure writes nothing.
A stored number a writing script would use and cannot (a version, count or counter
that INCR/HINCRBY refuses, a time or source statistic that is not a number) raises
``ML_CORRUPT <key> <field>`` before its first write, and so does a key it touches
first after that write holding another Redis type than the store keeps there
(``ML_CORRUPT <key> holds a <type>, not a <type>``: ``EXPECT_TYPE``); ``RedisBase._run``
turns that, and every other error of a script's that comes from the data it met, into
``StoreCorruptError`` naming the key.

History entries are ``at \\x1f from \\x1f to \\x1f reason \\x1f root`` in a
capped list.  Record hash fields: S status, V version, l last_access,
n access_count, y confirmed_by, z contradicted_by (space-separated source ids),
j uses_ok, q uses_failed, r reviewed_at (the others are written verbatim from ARGV);
absent fields mean empty / zero / None.  Kept by RECORD for an identical retry (never
decoded into the record): D digest of the proposal, R the claim holder it superseded,
A the descendants that supersession marked (space-separated).

Every writing script also appends its lineage events to the namespace's event
stream (``XADD ... MAXLEN ~ cap``) in the same atomic step, after all checks,
so no change goes unannounced and no failed change is announced.  Entry fields:
p id of the entry before it (lets a reader tell a trimmed gap from none),
t type, m memory id, a time, and when set: r root id, s status, f previous
status, w reason, u successor, x affected ids (space-separated), v version.
"""

from __future__ import annotations

from memlineage.store.redis_record_lua import HISTORY, RECORD
from memlineage.store.redis_revise_lua import REVISE

# A key a script writes after its first write must hold the type the store keeps
# there, or nothing: a command on a key of another type fails with WRONGTYPE, and what
# the script wrote before would stay. So each writing script passes every key it first
# touches after its first write through `ml_expect_type` before that write (or in
# place of its EXISTS); a key it reads before its first write needs no check (the read
# fails first, and `RedisBase` names the key by TYPE on that error path). The grant,
# decision and proposal scripts (redis_grants, redis_decisions, redis_proposals) start
# with it too.
EXPECT_TYPE = """
-- Whether `key` holds a `t` (a type as TYPE names it; false: absent); ML_CORRUPT when
-- it holds another.
local function ml_expect_type(key, t)
  local got = redis.call('TYPE', key)['ok']
  if got == t then return true end
  if got ~= 'none' then error('ML_CORRUPT ' .. key .. ' holds a ' .. got .. ', not a ' .. t) end
  return false
end
"""

SET_STATUS = (
    HISTORY
    + """
-- Check and apply one status change; return the record with its history and children.
-- KEYS[1] record hash   KEYS[2] derivation list   KEYS[3] history list
-- KEYS[4] claim key (KEYS[1] when none)   KEYS[5] successor record hash (KEYS[1] when none)
-- KEYS[6] event stream of the namespace   KEYS[7] pending cascades of the namespace
-- ARGV[1] target status   ARGV[2] " statuses allowed to reach target "
-- ARGV[3] expected version or ""   ARGV[4] now   ARGV[5] reason   ARGV[6] id
-- ARGV[7] successor id or ""   ARGV[8] history cap   ARGV[9] "1" to release the claim
-- ARGV[10] event retention   ARGV[11] the cascade this change starts ("" when none),
-- noted in KEYS[7] under the id with the change: the walk is chunked, and a stopped
-- one is resumed from the note until it is removed (the walk's end)
-- ARGV[12] "1": refuse while a derivation's status is in ARGV[13] (" statuses "), read
-- here with the change (evict); KEYS[7+i] the record hash of derivation ARGV[13+i] as the
-- caller read the list (one missing: CLOSURE naming the ones to add, the caller retries)
-- Returns {1, HGETALL, history, derivations (the cascade's first frontier)} | {0, "NOTFOUND", ""}
--       | {0, "VERSION", actual} | {0, "TRANSITION", current} | {0, "NOSUCCESSOR", ""}
--       | {0, "CLOSURE", {ids}} | {0, "LIVE", {ids}, current}
local cur = redis.call('HGET', KEYS[1], 'S')
if not cur then return {0, 'NOTFOUND', ''} end
local version = ml_int(KEYS[1], 'V')
if ARGV[3] ~= '' and ARGV[3] ~= version then return {0, 'VERSION', version} end
if not string.find(ARGV[2], ' ' .. cur .. ' ', 1, true) then return {0, 'TRANSITION', cur} end
if ARGV[12] == '1' then
  local at = {}
  for i = 14, #ARGV do at[ARGV[i]] = i - 6 end
  local missing, live = {}, {}
  for _, kid in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
    if not at[kid] then
      missing[#missing + 1] = kid
    else
      local st = redis.call('HGET', KEYS[at[kid]], 'S')
      if st and string.find(ARGV[13], ' ' .. st .. ' ', 1, true) then live[#live + 1] = kid end
    end
  end
  if #missing > 0 then return {0, 'CLOSURE', missing} end
  if #live > 0 then return {0, 'LIVE', live, cur} end
end
if ARGV[7] ~= '' and not ml_expect_type(KEYS[5], 'hash') then
  return {0, 'NOSUCCESSOR', ''}
end
ml_expect_type(KEYS[2], 'list')
ml_expect_type(KEYS[3], 'list')
if ARGV[9] == '1' and KEYS[4] ~= KEYS[1] then ml_expect_type(KEYS[4], 'string') end
ml_expect_type(KEYS[6], 'stream')
if ARGV[11] ~= '' then ml_expect_type(KEYS[7], 'hash') end
redis.call('HSET', KEYS[1], 'S', ARGV[1])
ml_revive(KEYS[1], cur, ARGV[1])
if ARGV[11] ~= '' then redis.call('HSET', KEYS[7], ARGV[6], ARGV[11]) end
local new_version = redis.call('HINCRBY', KEYS[1], 'V', 1)
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'u', ARGV[7]) end
push_history(KEYS[3], ARGV[4] .. US .. cur .. US .. ARGV[1] .. US .. ARGV[5] .. US .. ARGV[6],
  tonumber(ARGV[8]))
if ARGV[9] == '1' and redis.call('GET', KEYS[4]) == ARGV[6] then
  redis.call('DEL', KEYS[4])
end
emit(KEYS[6], ARGV[10], 't', 'status_changed', 'm', ARGV[6], 'a', ARGV[4], 's', ARGV[1],
  'f', cur, 'w', ARGV[5], 'u', ARGV[7], 'v', tostring(new_version))
return {1, redis.call('HGETALL', KEYS[1]), redis.call('LRANGE', KEYS[3], 0, -1),
  redis.call('LRANGE', KEYS[2], 0, -1)}
"""
)

CASCADE_MARK = (
    HISTORY
    + """
-- Mark one chunk of descendants pending_verification and return their children, atomically
-- per chunk. Children recorded after a node is marked inherit the mark at record time
-- (RECORD's taint check), so the BFS driven by the returned children misses nobody.
-- KEYS[3i-2] record hash, KEYS[3i-1] derivation list, KEYS[3i] history list of node i
-- KEYS[#KEYS] event stream of the namespace
-- ARGV[1] " statuses to mark "   ARGV[2] now   ARGV[3] reason   ARGV[4] root id
-- ARGV[5] history cap   ARGV[6] event retention   ARGV[7] root status
-- ARGV[8] id the walk started from
-- ARGV[9] length of the record key prefix (a record key is that prefix then the id)
-- A node whose version is damaged (missing, or not an integer HINCRBY takes) is marked
-- all the same (status and history: a descendant of a tainted memory must not stay
-- active once its version is mended), its version left as it is, and returned.
-- Everything is read before the first write (a key of another type fails its read:
-- WRONGTYPE, named by RedisBase), the history of each node it marks too (LLEN, the
-- cheapest read: one command per marked node), so a chunk is marked whole or not at all.
-- Returns {{ids marked, in order}, {child ids ...}, {ids marked whose version is damaged}};
-- one "cascaded" event when any marked
local marked = {}
local kids_out = {}
local damaged = {}
local at, sts, vs = {}, {}, {}
local n = 0
local cap = tonumber(ARGV[5])
local skip = tonumber(ARGV[9]) + 1
local tail = US .. 'pending_verification' .. US .. ARGV[3] .. US .. ARGV[4]
for i = 1, #KEYS - 1, 3 do
  local sv = redis.call('HMGET', KEYS[i], 'S', 'V')
  local st = sv[1]
  if st and string.find(ARGV[1], ' ' .. st .. ' ', 1, true) then
    redis.call('LLEN', KEYS[i + 2])
    n = n + 1
    at[n], sts[n], vs[n] = i, st, sv[2]
  end
  local kids = redis.call('LRANGE', KEYS[i + 1], 0, -1)
  for j = 1, #kids do kids_out[#kids_out + 1] = kids[j] end
end
if n == 0 then return {marked, kids_out, damaged} end
ml_expect_type(KEYS[#KEYS], 'stream')
for k = 1, n do
  local i, v = at[k], vs[k]
  local id = string.sub(KEYS[i], skip)
  if v and ml_is_int(v) then
    redis.call('HSET', KEYS[i], 'S', 'pending_verification', 'V', tonumber(v) + 1)
  else
    redis.call('HSET', KEYS[i], 'S', 'pending_verification')
    damaged[#damaged + 1] = id
  end
  push_history(KEYS[i + 2], ARGV[2] .. US .. sts[k] .. tail, cap)
  ml_revive(KEYS[i], sts[k], 'pending_verification')
  marked[k] = id
end
emit(KEYS[#KEYS], ARGV[6], 't', 'cascaded', 'm', ARGV[8], 'a', ARGV[2], 'r', ARGV[4],
  's', ARGV[7], 'w', ARGV[3], 'x', table.concat(marked, ' '))
return {marked, kids_out, damaged}
"""
)

UPDATE = (
    HISTORY
    + """
-- Compare-and-set: write fields only if the version is still the expected one.
-- KEYS[1] record hash   KEYS[2] derivation list   KEYS[3] history list
-- KEYS[4] event stream of the namespace
-- ARGV[1] expected version   ARGV[2] space-separated fields to delete (may be "")
-- ARGV[3] now   ARGV[4] event retention   ARGV[5] id
-- ARGV[6 ..] field, value pairs to set
-- Returns {1, HGETALL, history, derivations} | {0, "NOTFOUND", ""} | {0, "VERSION", actual}
local version = ml_int(KEYS[1], 'V')
if not version then return {0, 'NOTFOUND', ''} end
if version ~= ARGV[1] then return {0, 'VERSION', version} end
ml_expect_type(KEYS[2], 'list')
ml_expect_type(KEYS[3], 'list')
ml_expect_type(KEYS[4], 'stream')
if #ARGV > 5 then redis.call('HSET', KEYS[1], unpack(ARGV, 6)) end
for f in string.gmatch(ARGV[2], '%S+') do redis.call('HDEL', KEYS[1], f) end
local new_version = redis.call('HINCRBY', KEYS[1], 'V', 1)
emit(KEYS[4], ARGV[4], 't', 'updated', 'm', ARGV[5], 'a', ARGV[3], 'v', tostring(new_version))
return {1, redis.call('HGETALL', KEYS[1]), redis.call('LRANGE', KEYS[3], 0, -1),
  redis.call('LRANGE', KEYS[2], 0, -1)}
"""
)

ACCESS = """
-- Add buffered reads to the access statistics of existing records (never creates a key).
-- KEYS[i] record hash   ARGV[2i-1] reads to add to n   ARGV[2i] their latest time
-- l (last_access) only moves forward.  Returns the number of records that existed.
-- Every record's n and l are checked before the first write.
local live = {}
local lasts = {}
for i = 1, #KEYS do
  if ml_expect_type(KEYS[i], 'hash') then
    ml_int(KEYS[i], 'n')
    local last = redis.call('HGET', KEYS[i], 'l')
    if last and not tonumber(last) then ml_corrupt(KEYS[i], 'l') end
    live[#live + 1] = i
    lasts[i] = last
  end
end
for _, i in ipairs(live) do
  redis.call('HINCRBY', KEYS[i], 'n', ARGV[2 * i - 1])
  local at = ARGV[2 * i]
  local last = lasts[i]
  if not last or tonumber(last) < tonumber(at) then redis.call('HSET', KEYS[i], 'l', at) end
end
return #live
"""

LOAD = """
-- Read a batch of records in one call (one BFS level of a lineage view).
-- KEYS[1 .. n] record hashes, KEYS[n+1 .. 2n] their derivation lists, and with history
-- KEYS[2n+1 .. 3n] their history lists (n = #KEYS / ARGV[1])
-- ARGV[1] keys per record: 2 (no history) or 3
-- Returns, per record, {HGETALL, derivations[, history]} flattened: the first element
-- of a missing record is an empty array (its lists are not read).
local per = tonumber(ARGV[1])
local n = #KEYS / per
local out = {}
local empty = {}
for i = 1, n do
  local h = redis.call('HGETALL', KEYS[i])
  out[#out + 1] = h
  if #h == 0 then
    out[#out + 1] = empty
    if per == 3 then out[#out + 1] = empty end
  else
    out[#out + 1] = redis.call('LRANGE', KEYS[n + i], 0, -1)
    if per == 3 then out[#out + 1] = redis.call('LRANGE', KEYS[2 * n + i], 0, -1) end
  end
end
return out
"""

COUNTER_ADD = """
-- Add one event to a sliding-window counter and drop events past the retention.
-- KEYS[1] counter zset   ARGV[1] now   ARGV[2] unique member   ARGV[3] cutoff time
-- ARGV[4] key TTL in milliseconds (idle counters disappear)
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"""

ADD_DEPENDENCIES = (
    HISTORY
    + """
-- Add dependencies to an existing memory. The caller checked for cycles against the
-- ancestor graph as of graph epoch ARGV[4]; only add_dependencies changes existing
-- ancestors, and it bumps the epoch, so an unchanged epoch means the check still holds.
-- KEYS[1] record hash   KEYS[2] history list   KEYS[3] namespace graph epoch
-- KEYS[4] derivation list of the memory   KEYS[5] event stream of the namespace
-- KEYS[5+i] record hash of new dependency i, KEYS[5+n+i] its derivation list (i = 1..n)
-- KEYS[6+2n] pending cascades of the namespace (a tainting edge notes its cascade there)
-- ARGV[1] id   ARGV[2] n   ARGV[3] expected version   ARGV[4] epoch seen ("" when unset)
-- ARGV[5] new value of field d   ARGV[6] " tainted statuses "   ARGV[7] " markable statuses "
-- ARGV[8] now   ARGV[9] history cap   ARGV[10] event retention
-- ARGV[11 .. 10+n] new dependency ids
-- Returns {1, taint root or "", reason, children when marked, taint root status}
--       | {0, "NOTFOUND", ""} | {0, "VERSION", actual} | {0, "RETRY", ""} | {0, "NODEP", i-1}
local n = tonumber(ARGV[2])
local version = ml_int(KEYS[1], 'V')
if not version then return {0, 'NOTFOUND', ''} end
if version ~= ARGV[3] then return {0, 'VERSION', version} end
local epoch = redis.call('GET', KEYS[3])
if epoch and not ml_is_int(epoch) then ml_corrupt(KEYS[3], '') end  -- INCR'd below
if (epoch or '') ~= ARGV[4] then return {0, 'RETRY', ''} end
local taint_i = nil
local taint_st = nil
for i = 1, n do
  local st = redis.call('HGET', KEYS[5 + i], 'S')
  if not st then return {0, 'NODEP', tostring(i - 1)} end
  if not taint_i and string.find(ARGV[6], ' ' .. st .. ' ', 1, true) then
    taint_i = i
    taint_st = st
  end
end
ml_expect_type(KEYS[2], 'list')
ml_expect_type(KEYS[4], 'list')
ml_expect_type(KEYS[5], 'stream')
for i = 1, n do ml_expect_type(KEYS[5 + n + i], 'list') end
ml_expect_type(KEYS[6 + 2 * n], 'hash')
redis.call('HSET', KEYS[1], 'd', ARGV[5])
local new_version = tostring(redis.call('HINCRBY', KEYS[1], 'V', 1))
redis.call('INCR', KEYS[3])
for i = 1, n do redis.call('RPUSH', KEYS[5 + n + i], ARGV[1]) end
emit(KEYS[5], ARGV[10], 't', 'updated', 'm', ARGV[1], 'a', ARGV[8], 'v', new_version)
local cur = redis.call('HGET', KEYS[1], 'S')
if taint_i and string.find(ARGV[7], ' ' .. cur .. ' ', 1, true) then
  local why = 'dependency ' .. taint_st
  redis.call('HSET', KEYS[1], 'S', 'pending_verification')
  ml_revive(KEYS[1], cur, 'pending_verification')
  push_history(KEYS[2], ARGV[8] .. US .. cur .. US .. 'pending_verification' .. US ..
    why .. US .. ARGV[10 + taint_i], tonumber(ARGV[9]))
  emit(KEYS[5], ARGV[10], 't', 'status_changed', 'm', ARGV[1], 'a', ARGV[8],
    's', 'pending_verification', 'f', cur, 'w', why, 'r', ARGV[10 + taint_i], 'v', new_version)
  redis.call('HSET', KEYS[6 + 2 * n], ARGV[1],
    ARGV[10 + taint_i] .. US .. taint_st .. US .. why .. US .. ARGV[8])
  return {1, ARGV[10 + taint_i], why, redis.call('LRANGE', KEYS[4], 0, -1), taint_st}
end
return {1, '', '', {}, ''}
"""
)

EVENTS = """
-- Read the event stream strictly after a cursor, refusing a cursor whose successors were
-- trimmed (the oldest retained entry's field p names the entry before it) or that is
-- ahead of the stream (reset).  Cursors arrive normalised: "ms-seq", no leading zeros.
-- KEYS[1] event stream of the namespace
-- ARGV[1] cursor, "" for the oldest retained   ARGV[2] count
-- Returns {1, last entry id or "0-0", entries} | {0, "EXPIRED", oldest kept predecessor}
--       | {0, "AHEAD", last entry id} | {0, "LOST", the next entry's predecessor}
local function less(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  if #am ~= #bm then return #am < #bm end
  if am ~= bm then return am < bm end
  if #as ~= #bs then return #as < #bs end
  return as < bs
end
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
local after = ARGV[1]
if not last then
  if after ~= '' and after ~= '0-0' then return {0, 'AHEAD', '0-0'} end
  return {1, '0-0', {}}
end
if after == '' then
  return {1, last[1], redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', ARGV[2])}
end
if less(last[1], after) then return {0, 'AHEAD', last[1]} end
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
local prev = '0-0'
for j = 1, #first[2], 2 do
  if first[2][j] == 'p' then prev = first[2][j + 1] end
end
if less(after, prev) then return {0, 'EXPIRED', prev} end
local later = redis.call('XRANGE', KEYS[1], '(' .. after, '+', 'COUNT', ARGV[2])
-- The entry after the cursor names its predecessor (field p): another one than the
-- cursor means the cursor's entry is not in the log any more, though later ones are (a
-- failover to a replica that never got it, then new writes): the reader saw changes
-- the store no longer holds.
if later[1] then
  for j = 1, #later[1][2], 2 do
    if later[1][2][j] == 'p' and later[1][2][j + 1] ~= after then
      return {0, 'LOST', later[1][2][j + 1]}
    end
  end
end
return {1, last[1], later}
"""

FEEDBACK = """
-- Count one use (successful or failed) of existing records and of their creators.
-- KEYS[1 .. #KEYS-1] record hashes   KEYS[#KEYS] source statistics hash of the namespace
-- ARGV[1] record field to increment (j uses_ok, q uses_failed)   ARGV[2] "|ok" or "|bad"
-- Returns the number of records that existed.  Every count it adds to (the records'
-- field, the creators' statistics) is checked before the first write.
local src = KEYS[#KEYS]
local live = {}
local incr = {}
local order = {}
for i = 1, #KEYS - 1 do
  local c = redis.call('HGET', KEYS[i], 'c')
  if c then
    ml_int(KEYS[i], ARGV[1])
    live[#live + 1] = KEYS[i]
    local f = c .. ARGV[2]
    if not incr[f] then
      incr[f] = 0
      order[#order + 1] = f
    end
    incr[f] = incr[f] + 1
  end
end
for _, f in ipairs(order) do
  local v = redis.call('HGET', src, f)
  if v and not ml_is_float(v) then ml_corrupt(src, f) end
end
for _, key in ipairs(live) do redis.call('HINCRBY', key, ARGV[1], 1) end
for _, f in ipairs(order) do redis.call('HINCRBYFLOAT', src, f, incr[f]) end
return #live
"""

SCHEDULE_REVIEW = (
    EXPECT_TYPE
    + """
-- Set the next review time of existing records and stamp their reviewed_at.
-- KEYS[1 .. #KEYS-1] record hash of id i   KEYS[#KEYS] review schedule zset
-- ARGV[1] now   ARGV[2i] id i   ARGV[2i+1] its next review time
-- Returns the number of records scheduled.
-- Every record's type is checked before the first write.
local z = #KEYS
local live = {}
for i = 1, z - 1 do
  if ml_expect_type(KEYS[i], 'hash') then live[#live + 1] = i end
end
for _, i in ipairs(live) do
  redis.call('ZADD', KEYS[z], ARGV[2 * i + 1], ARGV[2 * i])
  redis.call('HSET', KEYS[i], 'r', ARGV[1])
end
return #live
"""
)

# Each writing script counts itself in the namespace's write counter (reads of
# access statistics: the access counter), in the same atomic step as its writes: a
# caller that read the counters before reading the store knows that an unchanged
# counter means nothing it read has changed (decision reuse across sidecars). The
# counter key is the script's last KEY, the namespace's claim revivals (redis_keys: cr)
# the one before it and, when the counter does not exist yet, its start value the last
# ARGV (random: a counter lost with its data never repeats the values it had; the
# revivals start there too; the counter also moves by a random step taken from it, so a
# counter taken back by a failover does not repeat them either); all are taken off
# before the script proper sees KEYS and ARGV. A
# refusal ({0, ...}) or a write of nothing (0, or a replay {2, ...}) leaves the counter
# alone, as it leaves every other key.
_COUNTED_HEAD = (
    EXPECT_TYPE
    + """
local ml_counter = KEYS[#KEYS]
KEYS[#KEYS] = nil
local ml_revivals = KEYS[#KEYS]
KEYS[#KEYS] = nil
local ml_counter_start = ARGV[#ARGV]
ARGV[#ARGV] = nil
local function ml_corrupt(key, field)
  error('ML_CORRUPT ' .. key .. ' ' .. field)
end
-- A decimal integer INCR/HINCRBY takes (no '+', no leading zero) of 18 digits at most,
-- so that no increment of the store's overflows.
local function ml_is_int(v)
  return v == '0' or string.find(v, '^%-?[1-9]' .. string.rep('%d?', 17) .. '$') ~= nil
end
-- A number HINCRBYFLOAT takes and keeps finite.
local function ml_is_float(v)
  local x = tonumber(v)
  return x ~= nil and x == x and x ~= math.huge and x ~= -math.huge
    and not string.find(v, '^%s') and not string.find(v, '%s$')
end
-- A hash field's value (false when absent), raising ML_CORRUPT unless ml_is_int.
local function ml_int(key, field)
  local v = redis.call('HGET', key, field)
  if v and not ml_is_int(v) then ml_corrupt(key, field) end
  return v
end
local ml_counter_now = redis.call('GET', ml_counter)
if ml_counter_now and not ml_is_int(ml_counter_now) then ml_corrupt(ml_counter, '') end
-- Claim revivals (redis_keys: cr): a memory with a claim (field s) moved from archived
-- or compressed back to active or pending_verification. Its claim's peers hash may
-- lack it: RECORD then reads the whole group once (a peers hash's "~" no longer matches).
local ml_revivals_now = redis.call('GET', ml_revivals)
if ml_revivals_now and not ml_is_int(ml_revivals_now) then ml_corrupt(ml_revivals, '') end
ml_revivals_now = ml_revivals_now or '0'
local ml_revived = false
local function ml_revive(key, from, to)
  if (from == 'archived' or from == 'compressed')
      and (to == 'active' or to == 'pending_verification')
      and redis.call('HEXISTS', key, 's') == 1 then
    ml_revived = true
  end
end
-- The descendants of `start` by the derivation lists (`first`: its own list's key),
-- each of which must be in KEYS (`node`: id -> the KEYS index of its record hash, its
-- derivation list at the next index). Returns the S and V read of each by KEYS index
-- (V checked where S is one the cascade marks, `marks`: " status ... "), and the ids
-- of the descendants KEYS lack.
local function ml_closure(node, start, first, marks)
  local held, missing = {}, {}
  local seen = {[start] = true}
  local queue = redis.call('LRANGE', first, 0, -1)
  local head = 1
  while head <= #queue do
    local id = queue[head]
    head = head + 1
    if not seen[id] then
      seen[id] = true
      local at = node[id]
      if at then
        local sv = redis.call('HMGET', KEYS[at], 'S', 'V')
        if sv[1] and string.find(marks, ' ' .. sv[1] .. ' ', 1, true)
            and not (sv[2] and ml_is_int(sv[2])) then
          ml_corrupt(KEYS[at], 'V')
        end
        held[at] = sv
        local kids = redis.call('LRANGE', KEYS[at + 1], 0, -1)
        for j = 1, #kids do queue[#queue + 1] = kids[j] end
      else
        missing[#missing + 1] = id
      end
    end
  end
  return held, missing
end
local function ml_script()
"""
)
_COUNTED_TAIL = """
end
local ml_result = ml_script()
if not (ml_result == 0 or (type(ml_result) == 'table' and
    (ml_result[1] == 0 or ml_result[1] == 2))) then
  redis.call('SET', ml_counter, ml_counter_start, 'NX')
  -- A random step (1 to 2^20, from the call's random ARGV): a counter a failover took
  -- back (the promoted replica lacked the last writes) never comes back to a value a
  -- sidecar kept a decision under, as the next write's +1 did.
  redis.call('INCRBY', ml_counter, 1 + math.fmod(tonumber(ml_counter_start), 1048576))
  if ml_revived then
    redis.call('SET', ml_revivals, ml_counter_start, 'NX')
    redis.call('INCR', ml_revivals)
  end
end
return ml_result
"""

# script -> the counter it moves: "w" writes, "a" access statistics; others none.
COUNTERS = {
    "record": "w",
    "set_status": "w",
    "cascade_mark": "w",
    "update": "w",
    "add_dependencies": "w",
    "revise": "w",
    "feedback": "w",
    "counter_add": "w",
    "access": "a",
}

_SOURCES = {
    "record": RECORD,
    "set_status": SET_STATUS,
    "cascade_mark": CASCADE_MARK,
    "update": UPDATE,
    "access": ACCESS,
    "counter_add": COUNTER_ADD,
    "add_dependencies": ADD_DEPENDENCIES,
    "revise": REVISE,
    "events": EVENTS,
    "feedback": FEEDBACK,
    "schedule_review": SCHEDULE_REVIEW,
    "load": LOAD,
}
ALL = {
    name: _COUNTED_HEAD + src + _COUNTED_TAIL if name in COUNTERS else src
    for name, src in _SOURCES.items()
}

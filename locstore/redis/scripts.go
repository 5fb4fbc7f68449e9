package redis

import (
	"crypto/sha1"
	"encoding/hex"
)

// The Lua scripts below are the whole server-side contract of the
// provider (docs/store-redis.md describes them in prose). Each SPI operation
// is one script call, so everything it reads and writes is observed and
// changed atomically by Redis; StoreNow is the server's TIME read inside the
// call. Scripts touch only keys under the namespace hash tag, so on a Cluster
// every call runs on the one node owning that slot.
//
// Numbers: Redis turns a Lua number argument into text with "%.14g", which
// switches to exponent notation at 10^14, so every number that is stored or
// compared as text goes through fmt ("%.0f"). Sequence numbers and
// millisecond timestamps stay far below 2^53 and are exact in Lua doubles.

// luaPrelude is shared by all scripts.
const luaPrelude = `
local function fmt(n) return string.format('%.0f', n) end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// readSrc: KEYS[1] = data key, KEYS[2] = commit sequence. Returns {now,
// seq} when the key is absent or expired at now, else {now, seq, value,
// version, expiresAt or empty}; seq is the commit sequence's value ('0'
// when absent), for the rollback watch (rollback.go).
const readSrc = luaPrelude + `
local now = now_ms()
local seq = redis.call('GET', KEYS[2]) or '0'
local r = redis.call('HMGET', KEYS[1], 'v', 's', 'x')
if not r[2] then return {now, seq} end
if r[3] and tonumber(r[3]) <= now then return {now, seq} end
return {now, seq, r[1] or '', r[2], r[3] or ''}
`

// readManySrc: KEYS = data keys, then the commit sequence. Returns {now,
// seq, then per data key three elements: value, version, expiresAt} with an
// empty version for a key absent or expired at now (a stored version is
// never empty); seq as in readSrc. One script run, so every key is
// observed at the same instant.
const readManySrc = luaPrelude + `
local now = now_ms()
local out = {now, redis.call('GET', KEYS[#KEYS]) or '0'}
for i = 1, #KEYS - 1 do
  local r = redis.call('HMGET', KEYS[i], 'v', 's', 'x')
  if (not r[2]) or (r[3] and tonumber(r[3]) <= now) then
    out[#out + 1] = ''
    out[#out + 1] = ''
    out[#out + 1] = ''
  else
    out[#out + 1] = r[1] or ''
    out[#out + 1] = r[2]
    out[#out + 1] = r[3] or ''
  end
end
return out
`

// openSnapshotsLua finds the open snapshots of the namespace. KEYS[2] of
// the write script and KEYS[3] of the scan script is the registry, a ZSET of
// snapshot ids scored by their sequence S; a snapshot is open while its
// record {ns}:snap:<id> exists (it has a PEXPIRE of the snapshot TTL).
// Members whose record expired are purged lazily from either end; a stale
// member left in the middle only makes the provider keep history a little
// longer than needed.
const openSnapshotsLua = `
local function open_end(reg, ns, first)
  for _ = 1, 8 do
    local e
    if first then e = redis.call('ZRANGE', reg, 0, 0, 'WITHSCORES')
    else e = redis.call('ZRANGE', reg, -1, -1, 'WITHSCORES') end
    if #e == 0 then return nil end
    if redis.call('EXISTS', ns .. 'snap:' .. e[1]) == 1 then return tonumber(e[2]) end
    redis.call('ZREM', reg, e[1])
  end
  -- Too many expired snapshots at this end to purge in one call: assume the
  -- most conservative answer (every record may be needed).
  if first then return 0 end
  return math.huge
end
`

// writeSrc is the conditional atomic batch.
//
// KEYS[1] commit sequence, KEYS[2] snapshot registry, KEYS[3] key index,
// then for batch key i (1-based): KEYS[2+2i] its data key, KEYS[3+2i] its
// history key. Keys that carry a mutation come first, in mutation order, so
// the versions returned line up with WriteRequest.Mutations.
//
// ARGV[1] number of batch keys n, ARGV[2] number of mutations m, ARGV[3]
// namespace prefix "{ns}:", ARGV[4] this client's snapshot TTL in ms; then
// six fields per batch key at b = 4+6(i-1): b+1 key, b+2 condition
// (empty: none, 'm' Missing, 'v' Version), b+3 expected version, b+4
// mutation (empty: none, 'p' put, 'd' delete), b+5 retention ms (0 =
// durable), b+6 value.
//
// Returns {0, now} on Conflict (nothing written) or {1, now, v_1..v_m} where
// v_j is the new version of mutation j (empty for a delete); {3, now,
// v_1..v_m, was, raised} when the commit sequence stood at was, below a
// record the batch replaced or deletes, and was raised to that record's
// sequence number first (lost on its own).
//
// Expiring records leave the index through {ns}:exp, a ZSET of keys scored
// by the instant their data key (or, for a deleted key, its history) is
// physically gone. Without it a record that simply expires would keep its
// index entry for good unless a scan happened to pass over it — and the
// framework never scans the prefixes of its expiring records (a creation
// writes two), so the index grew by two entries per creation forever. A
// batch that puts an expiring record also reaps at most reapBatch entries
// already due: the work is paced by the writes that cause it, with no
// background job, and bounded per call.
//
// Phase 1 only reads. Phase 2 runs only when every condition held. Redis
// does not roll back a script that fails half-way, so phase 2 issues nothing
// that can fail on well-formed namespace data; maxmemory cannot cut it short
// either, because Redis refuses a script for OOM only at its first write.
const writeSrc = luaPrelude + openSnapshotsLua + reapLua + `
local MARGIN = 200
local now = now_ms()
local n = tonumber(ARGV[1])
-- Records read by phase 1, reused by phase 2: batch keys are distinct, so a
-- mutation of one key never changes what was read for another.
local seen = {}
for i = 1, n do
  local b = 4 + 6 * (i - 1)
  local c = ARGV[b + 2]
  if c ~= '' then
    local r = redis.call('HMGET', KEYS[2 + 2 * i], 's', 'x')
    seen[i] = r
    local live = r[1] and (not r[2] or tonumber(r[2]) > now)
    if c == 'm' then
      if live then return {0, now} end
    elseif not live or r[1] ~= ARGV[b + 3] then
      return {0, now}
    end
  end
end
local out = {1, now}
local m = tonumber(ARGV[2])
if m == 0 then return out end

local ns = ARGV[3]
local ttl = tonumber(ARGV[4])
-- A replaced or deleted record needs history only if an open snapshot can
-- see it, i.e. some open snapshot has S >= the record's seq: compare with
-- the newest open snapshot. With none open, no history at all.
local maxS = open_end(KEYS[2], ns, false)
local minS, hist_ttl
if maxS then
  -- History must outlive every open snapshot; the registry's own TTL is
  -- extended to each new snapshot's TTL, so it bounds them all.
  hist_ttl = redis.call('PTTL', KEYS[2])
  if hist_ttl < 0 then hist_ttl = ttl end
  hist_ttl = hist_ttl + MARGIN
end

-- Drop history entries no open snapshot needs: an entry superseded at
-- sequence 'to' (its score) serves snapshots with S < to only.
local function trim(hk)
  if not minS then minS = open_end(KEYS[2], ns, true) or math.huge end
  local old = redis.call('ZRANGEBYSCORE', hk, '-inf', fmt(minS), 'LIMIT', 0, 16)
  for _, e in ipairs(old) do
    local from = string.match(e, '^(%d+):')
    if from then redis.call('DEL', ns .. 'hv:' .. from) end
    redis.call('ZREM', hk, e)
  end
end

-- Every record carries the sequence number of the write that stored it, so
-- the commit sequence stands at least at each. One below a record this
-- batch replaces or deletes was lost on its own (evicted under an allkeys-*
-- maxmemory policy, deleted, restored apart from the records): the numbers
-- drawn next were handed out already, and a writer still holding the
-- record's version would match the record that replaces it. Raise it
-- first (all reads before it: a script refused for OOM is refused here,
-- before anything changed), and far past the record: the sequence had
-- also numbered records written after it, records deleted since, and the
-- writes of processes whose rollback watch holds their highest number
-- (rollback.go) — 2^48 more mutations than that record saw since is beyond
-- any namespace's history, and far below where Lua's numbers lose
-- integers (2^53). The reply says so (status 3), for the provider's WARN.
local base = tonumber(redis.call('GET', KEYS[1]) or '0')
local top = base
for i = 1, n do
  if ARGV[4 + 6 * (i - 1) + 4] ~= '' then
    if not seen[i] then seen[i] = redis.call('HMGET', KEYS[2 + 2 * i], 's', 'x') end
    local s = tonumber(seen[i][1] or '0')
    if s > top then top = s end
  end
end
if top > base then
  top = top + 281474976710656 -- 2^48
  redis.call('SET', KEYS[1], fmt(top))
  out[1] = 3
end

local expiring = false
local seq = redis.call('INCRBY', KEYS[1], m) - m
for i = 1, n do
  local b = 4 + 6 * (i - 1)
  local op = ARGV[b + 4]
  if op ~= '' then
    seq = seq + 1
    local dk, hk, key = KEYS[2 + 2 * i], KEYS[3 + 2 * i], ARGV[b + 1]
    local old = seen[i] or redis.call('HMGET', dk, 's', 'x')
    if old[1] and maxS and tonumber(old[1]) <= maxS then
      local from = old[1]
      redis.call('SET', ns .. 'hv:' .. from, redis.call('HGET', dk, 'v') or '', 'PX', fmt(hist_ttl))
      redis.call('ZADD', hk, fmt(seq), from .. ':' .. (old[2] or ''))
      redis.call('PEXPIRE', hk, fmt(hist_ttl))
      trim(hk)
    end
    if op == 'p' then
      local s = fmt(seq)
      local ret = tonumber(ARGV[b + 5])
      if ret > 0 then
        local x = now + ret
        redis.call('HSET', dk, 'v', ARGV[b + 6], 's', s, 'x', fmt(x))
        -- Physical expiry waits a snapshot TTL longer, so a snapshot taken
        -- before expiresAt can still read the value.
        local gone = fmt(x + ttl + MARGIN)
        redis.call('PEXPIREAT', dk, gone)
        redis.call('ZADD', ns .. 'exp', gone, key)
        expiring = true
      else
        redis.call('HSET', dk, 'v', ARGV[b + 6], 's', s)
        if old[2] then
          redis.call('HDEL', dk, 'x')
          redis.call('PERSIST', dk)
        end
      end
      -- Invariant: a data key that exists has an index entry.
      if not old[1] then redis.call('ZADD', KEYS[3], 0, key) end
      out[#out + 1] = s
    else
      if old[1] then redis.call('DEL', dk) end
      -- The index entry stays while history exists, so snapshots find it,
      -- and is reaped once the history is gone.
      local pt = redis.call('PTTL', hk)
      if pt == -2 then
        redis.call('ZREM', KEYS[3], key)
        -- An expiring record deleted before it expired leaves {ns}:exp now
        -- rather than when due: a creation deletes one per creation.
        if old[2] then redis.call('ZREM', ns .. 'exp', key) end
      elseif pt >= 0 then redis.call('ZADD', ns .. 'exp', fmt(now + pt + 1), key) end
      out[#out + 1] = ''
    end
  end
end
if expiring then reap(KEYS[3], ns, now) end
if top > base then
  out[#out + 1] = fmt(base)
  out[#out + 1] = fmt(top)
end
return out
`

// reapBatch is the most {ns}:exp entries one write reaps (the literal in
// reapLua; a test keeps the two equal). A batch that puts an expiring
// record adds one entry and reaps up to eight, so while expiring records
// are written the due entries cannot pile up.
const reapBatch = 8

// reapLua removes the index entries of keys whose expiring record and
// history are both physically gone: the condition under which a scan
// purges an entry itself ("neither a record nor history"), so no snapshot
// can need it. A key whose data key exists again (put durable, or by a
// writer that does not know {ns}:exp) only leaves {ns}:exp; a key whose
// history outlives it is looked at again when the history is gone.
const reapLua = `
local function reap(idx, ns, now)
  local expk = ns .. 'exp'
  local due = redis.call('ZRANGEBYSCORE', expk, '-inf', fmt(now), 'LIMIT', 0, 8) -- reapBatch
  if #due == 0 then return end
  local unexp, unidx = {}, {}
  for _, key in ipairs(due) do
    local dk, hk = ns .. 'k:' .. key, ns .. 'h:' .. key
    -- One call answers the common case: neither a record nor history.
    if redis.call('EXISTS', dk, hk) == 0 then
      unexp[#unexp + 1] = key
      unidx[#unidx + 1] = key
    elseif redis.call('EXISTS', dk) == 1 then
      -- Redis expires a key only once now > its PEXPIREAT, so in the
      -- millisecond it is due the record still exists: look again then.
      local dpt = redis.call('PTTL', dk)
      if dpt >= 0 then
        redis.call('ZADD', expk, fmt(now + dpt + 1), key)
      else
        unexp[#unexp + 1] = key
      end
    else
      local pt = redis.call('PTTL', hk)
      if pt >= 0 then
        redis.call('ZADD', expk, fmt(now + pt + 1), key)
      else
        unexp[#unexp + 1] = key
      end
    end
  end
  -- At most reapBatch members each: far below Lua's unpack limit.
  if #unexp > 0 then redis.call('ZREM', expk, unpack(unexp)) end
  if #unidx > 0 then redis.call('ZREM', idx, unpack(unidx)) end
end
`

// scanSrc produces (part of) one page of a snapshot scan.
//
// KEYS[1] key index, KEYS[2] commit sequence, KEYS[3] snapshot registry,
// KEYS[4] snapshot record. ARGV[1] 'new' (fix a snapshot now) or 'cont'
// (read the snapshot in KEYS[4]), ARGV[2] prefix, ARGV[3] exclusive start key
// (empty = from the start of the prefix), ARGV[4] max items, ARGV[5] max bytes,
// ARGV[6] max index entries to examine, ARGV[7] snapshot TTL ms, ARGV[8]
// namespace prefix "{ns}:".
//
// Returns {0, now} when the snapshot is unknown, expired or was taken for
// another prefix, else {1, now, state, pos, key_1, value_1, version_1,
// expiresAt_1 or empty, ...}. state: 0 the snapshot is exhausted, 1 the page is
// full (a further visible item exists), 2 the examine budget ran out. pos is
// the last index entry fully processed; the next call starts after it.
//
// Data and history keys are derived from index entries, so they cannot be
// declared in KEYS; they share the namespace hash tag and hence the slot.
const scanSrc = luaPrelude + `
local now = now_ms()
local prefix, after = ARGV[2], ARGV[3]
local S, T0
if ARGV[1] == 'new' then
  S = tonumber(redis.call('GET', KEYS[2]) or '0')
  T0 = now
else
  local r = redis.call('HMGET', KEYS[4], 's', 't', 'p')
  if not r[1] or r[3] ~= prefix then return {0, now} end
  S = tonumber(r[1])
  T0 = tonumber(r[2])
end
local maxItems, maxBytes, budget = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local ttl = tonumber(ARGV[7])
local ns = ARGV[8]
local above = '(' .. fmt(S)

-- resolve returns the value, version and expiresAt a key had at sequence S,
-- judged live at T0, or nil.
local function resolve(key)
  local r = redis.call('HMGET', ns .. 'k:' .. key, 'v', 's', 'x')
  if r[2] and tonumber(r[2]) <= S then
    if r[3] and tonumber(r[3]) <= T0 then return nil end
    return r[1] or '', r[2], r[3] or ''
  end
  -- Current record absent or written after S: the record live at S, if
  -- any, is the history entry with the smallest superseding seq above S.
  local hk = ns .. 'h:' .. key
  local h = redis.call('ZRANGEBYSCORE', hk, above, '+inf', 'LIMIT', 0, 1)
  if #h == 0 then
    if not r[2] and redis.call('EXISTS', hk) == 0 then
      -- Neither a record nor history: the key is gone for every snapshot.
      redis.call('ZREM', KEYS[1], key)
    end
    return nil
  end
  local from, x = string.match(h[1], '^(%d+):(%d*)$')
  if not from or tonumber(from) > S then return nil end
  if x ~= '' and tonumber(x) <= T0 then return nil end
  local v = redis.call('GET', ns .. 'hv:' .. from)
  if not v then return nil end
  return v, from, x
end

local out = {1, now, 0, after}
local count, bytes, examined = 0, 0, 0
local pos = after
local state = 0
local lo
if after ~= '' then lo = '(' .. after elseif prefix ~= '' then lo = '[' .. prefix else lo = '-' end
-- Keys are UTF-8, which never contains the byte 0xFF, so prefix..0xFF is an
-- upper bound of every key that starts with prefix.
local hi = '+'
if prefix ~= '' then hi = '[' .. prefix .. '\255' end
local BATCH = 128
while true do
  local batch = redis.call('ZRANGEBYLEX', KEYS[1], lo, hi, 'LIMIT', 0, BATCH)
  for _, key in ipairs(batch) do
    if examined >= budget then state = 2; break end
    examined = examined + 1
    local v, ver, x = resolve(key)
    if v then
      local size = #key + #v + #ver
      if count >= maxItems or bytes + size > maxBytes then state = 1; break end
      out[#out + 1] = key
      out[#out + 1] = v
      out[#out + 1] = ver
      out[#out + 1] = x
      count = count + 1
      bytes = bytes + size
    end
    pos = key
  end
  if state ~= 0 or #batch < BATCH then break end
  lo = '(' .. batch[#batch]
end
out[3] = state
out[4] = pos

if ARGV[1] == 'new' and state ~= 0 then
  -- More remains: register the snapshot for the following calls.
  local id = string.sub(KEYS[4], #ns + 6)
  -- A write that frees memory first: Redis then lets the script's
  -- deny-oom writes through under maxmemory (a scan is a read).
  redis.call('ZREM', KEYS[3], id)
  redis.call('HSET', KEYS[4], 's', fmt(S), 't', fmt(T0), 'p', prefix)
  redis.call('PEXPIRE', KEYS[4], fmt(ttl))
  redis.call('ZADD', KEYS[3], fmt(S), id)
  if redis.call('PTTL', KEYS[3]) < ttl then redis.call('PEXPIRE', KEYS[3], fmt(ttl)) end
elseif ARGV[1] == 'cont' and state == 0 then
  -- The scan is complete: release the snapshot so that writers stop
  -- keeping history for it.
  redis.call('DEL', KEYS[4])
  redis.call('ZREM', KEYS[3], string.sub(KEYS[4], #ns + 6))
end
return out
`

// script is a Lua source and its SHA-1, for EVALSHA with an EVAL fallback.
type script struct {
	src string
	sha string
}

func newScript(src string) *script {
	h := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(h[:])}
}

var (
	readScript     = newScript(readSrc)
	readManyScript = newScript(readManySrc)
	writeScript    = newScript(writeSrc)
	scanScript     = newScript(scanSrc)
)

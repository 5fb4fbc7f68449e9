package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts below are the only code that changes a reference's
// records, so every Put, Renew and Delete is one atomic step on the server.
// They share one prelude that reads the server clock and classifies the
// reference.
//
// Common arguments: KEYS[1] is the meta key, KEYS[2] the data key; ARGV[1]
// is a clock offset in milliseconds added to TIME (always 0 outside this
// package's tests, where it replaces sleeping), ARGV[2] the reference.
//
// Meta hash fields (format version 1, see docs/store-relocation.md):
//
//	v    "1"
//	ref  the reference, compared exactly (the key only holds its SHA-256)
//	len  payload length in bytes, decimal
//	dg   lowercase hex SHA-256 of the payload
//	st   "live" or "gone" (deleted)
//	exp  payload expiry, epoch milliseconds on the server clock
//	tu   tombstone-until, epoch milliseconds; the meta key's PEXPIREAT
//
// State at now: absent (no meta, or now >= tu), live (st == "live" and
// now < exp), otherwise tomb (deleted or expired, digest still kept).
//
// Numbers are written with %.0f: Lua 5.1 numbers are doubles, which hold
// epoch milliseconds plus MaxRetention (< 2^53) exactly, and %.0f never
// produces an exponent that PEXPIREAT would reject.
const prelude = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
local function num(x) return string.format('%.0f', x) end
local ref = ARGV[2]
local m = redis.call('HMGET', KEYS[1], 'v', 'ref', 'len', 'dg', 'st', 'exp', 'tu')
local state = 'absent'
local exp = 0
if m[1] then
  if m[1] ~= '1' then
    return redis.error_reply('RSFORMAT unsupported relocation store record version ' .. tostring(m[1]))
  end
  if m[2] ~= ref then
    return redis.error_reply('RSCOLLISION another reference owns this key')
  end
  exp = tonumber(m[6])
  local tu = tonumber(m[7])
  if exp == nil or tu == nil or (m[5] ~= 'live' and m[5] ~= 'gone') then
    return redis.error_reply('RSFORMAT malformed relocation store record')
  end
  if now >= tu then
    state = 'absent'
  elseif m[5] == 'live' and now < exp then
    state = 'live'
  else
    state = 'tomb'
  end
end
`

// extend is shared by Put (AlreadyStored) and Renew: the expiry only ever
// moves later (to now+ret when that is later), and the data key TTL,
// tombstone-until and meta key TTL follow. Both arguments are milliseconds.
const extend = `
local function extend(ret, tomb)
  local nexp = math.max(exp, now + ret)
  if nexp > exp then
    redis.call('HSET', KEYS[1], 'exp', num(nexp), 'tu', num(nexp + tomb))
    redis.call('PEXPIREAT', KEYS[2], num(nexp))
    redis.call('PEXPIREAT', KEYS[1], num(nexp + tomb))
  end
  return nexp
end
`

// putScript: KEYS[3] is the staging key (only for modes probe and staged).
// ARGV[3] mode: "inline" (payload in ARGV[8]), "probe" (decide without the
// payload; answers "need" when it would have to be stored) or "staged" (the
// payload was SET at KEYS[3] just before, in the same pipeline).
// ARGV[4] length, ARGV[5] hex digest, ARGV[6] retention ms, ARGV[7]
// tombstone retention ms.
//
// Same bytes are recognised by length and digest: the script never sees a
// large payload, and RENAME moves the staged bytes without copying them.
var putScript = goredis.NewScript(prelude + extend + `
local mode = ARGV[3]
local function unstage()
  if mode == 'staged' then redis.call('DEL', KEYS[3]) end
end
local tomb = tonumber(ARGV[7])
if state ~= 'absent' then
  if m[3] ~= ARGV[4] or m[4] ~= ARGV[5] then
    unstage()
    return {'conflict', num(now)}
  end
  if state == 'live' and redis.call('EXISTS', KEYS[2]) == 1 then
    local nexp = extend(tonumber(ARGV[6]), tomb)
    unstage()
    return {'already', num(now), num(nexp)}
  end
  -- A tombstone of the same bytes, or a live record whose bytes vanished
  -- (evicted): store them again.
end
if mode == 'probe' then
  return {'need', num(now)}
end
local nexp = now + tonumber(ARGV[6])
if state == 'live' then
  nexp = math.max(nexp, exp)
end
if mode == 'inline' then
  redis.call('SET', KEYS[2], ARGV[8], 'PXAT', num(nexp))
elseif mode == 'staged' then
  if redis.call('STRLEN', KEYS[3]) ~= tonumber(ARGV[4]) then
    redis.call('DEL', KEYS[3])
    return redis.error_reply('RSSTAGING staged payload missing or of the wrong length')
  end
  redis.call('RENAME', KEYS[3], KEYS[2])
  redis.call('PEXPIREAT', KEYS[2], num(nexp))
else
  return redis.error_reply('RSARG unknown put mode')
end
redis.call('HSET', KEYS[1], 'v', '1', 'ref', ref, 'len', ARGV[4], 'dg', ARGV[5],
  'st', 'live', 'exp', num(nexp), 'tu', num(nexp + tomb))
redis.call('PEXPIREAT', KEYS[1], num(nexp + tomb))
return {'stored', num(now), num(nexp)}
`)

// readScript only classifies the reference; the data key is fetched by a
// GET pipelined right behind it, so a large payload is never copied into
// Lua. It writes nothing.
var readScript = goredis.NewScript(prelude + `
if state ~= 'live' then
  return {'missing', num(now)}
end
return {'found', num(now), num(exp), m[3], m[4]}
`)

// renewScript: ARGV[3] retention ms, ARGV[4] tombstone retention ms. A live
// record whose bytes vanished (evicted) is Missing, as Read would say.
var renewScript = goredis.NewScript(prelude + extend + `
if state ~= 'live' or redis.call('EXISTS', KEYS[2]) == 0 then
  return {'missing', num(now)}
end
local nexp = extend(tonumber(ARGV[3]), tonumber(ARGV[4]))
return {'renewed', num(now), num(nexp)}
`)

// deleteScript: ARGV[3] tombstone retention ms. A live payload becomes a
// tombstone kept until now + tombstone retention; an expired one keeps the
// tombstone it already has (until exp + tombstone retention).
var deleteScript = goredis.NewScript(prelude + `
if state == 'live' then
  local tu = now + tonumber(ARGV[3])
  redis.call('HSET', KEYS[1], 'st', 'gone', 'tu', num(tu))
  redis.call('PEXPIREAT', KEYS[1], num(tu))
end
if state ~= 'absent' then
  redis.call('DEL', KEYS[2])
end
return {'ok', num(now)}
`)

// writeCheckScript is New's check that the account may run every command
// the write scripts (and the staging SET) run, changing nothing: Redis
// checks a script's command against the account's ACL rule before the
// command itself, so each is called in a way that writes nothing and a
// denied one is told apart by its error. KEYS[1] and KEYS[2] are keys of
// the namespace that no record or staging key uses; a store never writes
// them. With KEYS[1] absent (checked first): SET … XX sets nothing, DEL
// and PEXPIREAT find nothing, RENAME answers "no such key"; HSET with an
// odd field/value count is refused by HSET itself. Those two answers are
// the only trace: two ERR counts in the server's errorstats. Other
// refusals (a read-only replica, OOM) come after the ACL check and are
// not this check's business: they are ignored. A denied command answers
// NOPERM naming it, with Redis's own text.
var writeCheckScript = goredis.NewScript(`
local function denied(name, r)
  if type(r) == 'table' and r.err and (string.find(r.err, 'NOPERM', 1, true) or string.find(r.err, "can't run this command", 1, true)) then
    return redis.error_reply("NOPERM the account may not run '" .. name .. "', which the store's write scripts run: " .. r.err)
  end
end
local absent = redis.pcall('EXISTS', KEYS[1])
local e = denied('exists', absent)
if e then return e end
local calls = {
  {'strlen', KEYS[1]},
  {'set', KEYS[1], '', 'XX'},
  {'hset', KEYS[1], 'f', 'v', 'odd'},
}
if absent == 0 then
  table.insert(calls, {'del', KEYS[1]})
  table.insert(calls, {'pexpireat', KEYS[1], '0'})
  table.insert(calls, {'rename', KEYS[1], KEYS[2]})
end
for _, c in ipairs(calls) do
  e = denied(c[1], redis.pcall(unpack(c)))
  if e then return e end
end
return 'ok'
`)

package redisintake

import "github.com/redis/go-redis/v9"

// acceptScript writes a key's latest state, its version and its dirty mark
// in one step, or refuses the write:
//
//	KEYS[1] the key's hash (fields v: version, p: state)
//	KEYS[2] the dirty set (a sorted set: member the key, score the time in
//	        milliseconds on the Redis clock when it became dirty)
//	ARGV[1] version  ARGV[2] state  ARGV[3] key  ARGV[4] dirty-key limit (0: none)
//
// It returns {0, version} when written, {1, current} for a resend of the
// current version with the same state (nothing written), {2, current} for
// a version not above the current one (nothing written), {3, dirty keys}
// when the key is clean and the dirty set holds the limit (nothing
// written). ZADD NX keeps the time a key first became dirty, so the oldest
// score is the age of the oldest unflushed write. Versions are compared as
// Lua numbers, exact up to 2^53 (MaxVersion).
var acceptScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'v')
local v = tonumber(ARGV[1])
if cur then
	cur = tonumber(cur)
	if v == cur and redis.call('HGET', KEYS[1], 'p') == ARGV[2] then
		return {1, cur}
	end
	if v <= cur then
		return {2, cur}
	end
end
local limit = tonumber(ARGV[4])
if limit > 0 and not redis.call('ZSCORE', KEYS[2], ARGV[3]) then
	local n = redis.call('ZCARD', KEYS[2])
	if n >= limit then
		return {3, n}
	end
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'p', ARGV[2])
local t = redis.call('TIME')
redis.call('ZADD', KEYS[2], 'NX', t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000)), ARGV[3])
return {0, v}
`)

// Results of acceptScript.
const (
	acceptWritten   = 0
	acceptDuplicate = 1
	acceptStale     = 2
	acceptFull      = 3
)

// cleanScript is the compare-and-delete of a key's dirty mark after its
// version reached SQL: the mark goes only if the key's version is still
// the one moved (a write accepted meanwhile keeps the key dirty). A key
// whose hash is gone (ARGV[1] empty) loses its mark too. When SQL had a
// later version than Redis (Redis lost writes it had moved), ARGV[3]
// raises the key's version to SQL's, so that older versions are refused
// again at once instead of being accepted and dropped by the next drain,
// and deletes the older state (no write of SQL's version is a duplicate
// of it).
//
//	KEYS[1] the key's hash  KEYS[2] the dirty set
//	ARGV[1] the version moved to SQL ('' for none)  ARGV[2] key
//	ARGV[3] SQL's version when above ARGV[1], else ''
//
// It returns 1 when the mark was deleted, 0 when the key was not dirty,
// -1 when its version moved.
var cleanScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'v') or ''
if cur ~= ARGV[1] then
	return -1
end
if ARGV[3] ~= '' then
	redis.call('HSET', KEYS[1], 'v', ARGV[3])
	redis.call('HDEL', KEYS[1], 'p')
end
return redis.call('ZREM', KEYS[2], ARGV[2])
`)

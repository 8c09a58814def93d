-- rwlock_acquire.lua: take a read-write lock for reading (shared) or writing (alone), and
-- mint the hold's fencing token. A refused writer claims the lock: new readers stay out
-- until it gets in, gives up (rwlock_release.lua) or its claim expires (after the TTL,
-- renewed by each attempt), so a stream of readers cannot starve it.
--
-- KEYS[1]  the lock's holders: a sorted set, member = owner token, score = when that hold
--          expires, in the server's milliseconds (many readers, or one writer)
-- KEYS[2]  the writer: the owner token of the member of KEYS[1] that writes, if any
-- KEYS[3]  a waiting writer's claim: its owner token, expiring with the claim
-- KEYS[4]  the lock's fencing counter
--          (all four share the lock key's {key} hash tag, so they live in one slot)
-- ARGV[1]  the owner token
-- ARGV[2]  the TTL, in milliseconds (of the hold, or of a refused writer's claim)
-- ARGV[3]  `read` or `write`
-- ARGV[4]  how long the keys outlive the latest hold, in milliseconds (a small bound)
--
-- Returns the fencing token (> 0) when taken; 0 when refused or the owner holds it already.
--
-- The clock is the server's (TIME), never the caller's.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
local holders = redis.call('ZCARD', KEYS[1])
local claimant = redis.call('GET', KEYS[3])
if ARGV[3] == 'read' then
  if claimant then
    return 0
  end
  if holders > 0 then
    local writer = redis.call('GET', KEYS[2])
    if writer and redis.call('ZSCORE', KEYS[1], writer) then
      return 0
    end
  end
  -- No live writer: whatever KEYS[2] names has expired.
  redis.call('DEL', KEYS[2])
elseif ARGV[3] == 'write' then
  if holders > 0 or (claimant and claimant ~= ARGV[1]) then
    -- Claimed, or the claim renewed by the claimant's next attempt.
    if not claimant or claimant == ARGV[1] then
      redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
    end
    return 0
  end
  redis.call('DEL', KEYS[3])
  redis.call('SET', KEYS[2], ARGV[1])
else
  return redis.error_reply('ERR rwlock_acquire.lua: ARGV[3] must be read or write')
end
redis.call('ZADD', KEYS[1], string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
-- Every key lives until the latest hold expires, plus the bound.
local latest = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
local keep = string.format('%.0f', latest - now + tonumber(ARGV[4]))
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('PEXPIRE', KEYS[2], keep)
-- Tokens as in acquire.lua: the server's clock in microseconds, or one more than the
-- last token when that is not smaller, so they grow across a failover too.
local token = tonumber(time[1]) * 1000000 + tonumber(time[2])
local last = tonumber(redis.call('GET', KEYS[4]))
if last and last >= token then
  token = last + 1
end
redis.call('SET', KEYS[4], string.format('%.0f', token), 'PX', keep)
return token

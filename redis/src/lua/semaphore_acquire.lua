-- semaphore_acquire.lua: take one of a semaphore's `limit` permits, and mint the permit's
-- fencing token.
--
-- KEYS[1]  the semaphore's holders: a sorted set, member = owner token, score = when that
--          permit expires, in the server's milliseconds
-- KEYS[2]  the semaphore's limit, as its first holder set it
-- KEYS[3]  the semaphore's fencing counter
--          (all three share the lock key's {key} hash tag, so they live in one slot)
-- ARGV[1]  the owner token
-- ARGV[2]  the TTL, in milliseconds
-- ARGV[3]  the limit this handle asks for (a whole number, at least 1)
-- ARGV[4]  how long the keys outlive the latest permit, in milliseconds (a small bound)
--
-- Returns the fencing token (> 0) when a permit was taken; 0 when all `limit` permits
-- are held or the owner holds one already; -L when the semaphore is held with another
-- limit L (every handle of a semaphore must agree on it).
--
-- The clock is the server's (TIME), never the caller's.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
local limit = tonumber(ARGV[3])
local holders = redis.call('ZCARD', KEYS[1])
if holders > 0 then
  local held = tonumber(redis.call('GET', KEYS[2]))
  if held and held ~= limit then
    return -held
  end
end
if holders >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
-- Every key lives until the latest permit expires, plus the bound.
local latest = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
local keep = string.format('%.0f', latest - now + tonumber(ARGV[4]))
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('SET', KEYS[2], ARGV[3], 'PX', keep)
-- Tokens as in acquire.lua: the server's clock in microseconds, or one more than the
-- last token when that is not smaller, so they grow across a failover too.
local token = tonumber(time[1]) * 1000000 + tonumber(time[2])
local last = tonumber(redis.call('GET', KEYS[3]))
if last and last >= token then
  token = last + 1
end
redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', keep)
return token

-- semaphore_acquire.lua: take `permits` of a semaphore's `limit` permits (one by
-- default), and mint the hold's fencing token.
--
-- KEYS[1]  the semaphore's holders: a sorted set, member = owner token, score = when that
--          permit expires, in the server's milliseconds
-- KEYS[2]  the semaphore's limit, as its first holder set it
-- KEYS[3]  the semaphore's fencing counter
-- KEYS[4]  optional: the permits of holders that hold more than one, a hash (owner
--          token -> permits); a holder missing from it holds one
-- KEYS[5]  optional (with KEYS[4]): the semaphore's fair mark
--          (fair_semaphore_acquire.lua): while it stands, fair handles hold or wait,
--          and this handle, not fair, is refused
--          (all share the lock key's {key} hash tag, so they live in one slot)
-- ARGV[1]  the owner token
-- ARGV[2]  the TTL, in milliseconds
-- ARGV[3]  the limit this handle asks for (a whole number, at least 1)
-- ARGV[4]  how long the keys outlive the latest permit, in milliseconds (a small bound)
-- ARGV[5]  optional: how many permits (1 to the limit; default 1; more needs KEYS[4])
--
-- Returns the fencing token (> 0) when the permits were taken; 0 when fewer than
-- `permits` are free; -L when the semaphore is held with another limit L (every handle
-- of a semaphore must agree on it); false (nil) while the fair mark stands. An owner
-- that holds these very permits already (as many, under this limit) is this call applied
-- a second time (see acquire.lua): taken, its expiry counted again, a new token; an owner
-- holding others is refused.
--
-- The clock is the server's (TIME), never the caller's.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))
local permits = tonumber(ARGV[5] or '1')
local limit = tonumber(ARGV[3])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  local weight = KEYS[4] and tonumber(redis.call('HGET', KEYS[4], ARGV[1])) or 1
  if weight ~= permits or tonumber(redis.call('GET', KEYS[2])) ~= limit then
    return 0
  end
else
  if KEYS[5] and redis.call('EXISTS', KEYS[5]) == 1 then
    return false
  end
  local holders = redis.call('ZCARD', KEYS[1])
  if holders > 0 then
    local held = tonumber(redis.call('GET', KEYS[2]))
    if held and held ~= limit then
      return -held
    end
  end
  -- The permits held: one per holder, plus what the weighted ones hold beyond one (their
  -- entries go with their holds: an expired or released holder's is dropped here).
  local used = holders
  if KEYS[4] and redis.call('EXISTS', KEYS[4]) == 1 then
    local weights = redis.call('HGETALL', KEYS[4])
    for i = 1, #weights, 2 do
      if redis.call('ZSCORE', KEYS[1], weights[i]) then
        used = used + tonumber(weights[i + 1]) - 1
      else
        redis.call('HDEL', KEYS[4], weights[i])
      end
    end
  end
  if used + permits > limit then
    return 0
  end
end
redis.call('ZADD', KEYS[1], string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
if permits > 1 then
  redis.call('HSET', KEYS[4], ARGV[1], ARGV[5])
end
-- Every key lives until the latest permit expires, plus the bound.
local latest = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
local keep = string.format('%.0f', latest - now + tonumber(ARGV[4]))
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('SET', KEYS[2], ARGV[3], 'PX', keep)
if KEYS[4] then
  redis.call('PEXPIRE', KEYS[4], keep)
end
-- Tokens as in acquire.lua: the server's clock in microseconds, or one more than the
-- last token when that is not smaller, so they grow across a failover too.
local token = tonumber(time[1]) * 1000000 + tonumber(time[2])
local last = tonumber(redis.call('GET', KEYS[3]))
if last and last >= token then
  token = last + 1
end
redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', keep)
return token

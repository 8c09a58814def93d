-- fair_semaphore_acquire.lua: a fair semaphore's attempt (`{ fair: true }`): take
-- `permits` of its `limit` when this owner is first in the semaphore's queue and that
-- many are free, else take or renew this owner's place at the end of the queue. A later,
-- smaller request never overtakes an earlier, larger one: only the first in line is
-- granted.
--
-- KEYS[1]  the semaphore's holders (semaphore_acquire.lua's KEYS[1])
-- KEYS[2]  the semaphore's limit (its KEYS[2])
-- KEYS[3]  the semaphore's fencing counter (its KEYS[3])
-- KEYS[4]  the weighted holders' permits (its KEYS[4])
-- KEYS[5]  the queue: a sorted set, member = owner token, score = when it first asked
--          (the server's clock in microseconds, made to grow)
-- KEYS[6]  the places' ends: a sorted set, member = owner token, score = when its place
--          runs out, in the server's milliseconds
-- KEYS[7]  the fair mark: lives while fair handles hold or wait (and a small bound
--          after); semaphore_acquire.lua refuses handles that are not fair while it
--          stands (all share the key's {key} hash tag, so they live in one slot)
-- ARGV[1]  the owner token
-- ARGV[2]  the TTL, in milliseconds: of the hold, and of the place from this attempt
-- ARGV[3]  the limit this handle asks for (a whole number, at least 1)
-- ARGV[4]  how long the keys outlive the latest hold or place, in milliseconds
-- ARGV[5]  how many permits (1 to the limit)
-- ARGV[6]  '1' when the caller waits (a place is kept); anything else: a single try
-- ARGV[7]  optional: SPUBLISH to publish on the key's shard (Redis Cluster); else PUBLISH
--
-- Returns the fencing token (> 0) when taken; 0 when not (with this owner's place kept
-- if it waits); -L when the semaphore is held with another limit L; false (nil) when
-- handles that are not fair hold it. A grant that leaves others in line tells them on
-- `<KEYS[1]>:released` (the next may fit beside it). An owner that holds these very
-- permits already is this call applied a second time (see semaphore_acquire.lua).
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local owner = ARGV[1]
local ttl = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local grace = tonumber(ARGV[4])
local permits = tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))
-- Places that ran out leave the queue.
local gone = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now)
for i = 1, #gone do
  redis.call('ZREM', KEYS[5], gone[i])
end
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
end
-- Keeps the mark alive for at least `ms` from now.
local function mark(ms)
  if redis.call('PTTL', KEYS[7]) < ms then
    redis.call('SET', KEYS[7], '1', 'PX', string.format('%.0f', ms))
  end
end
local function wait()
  if ARGV[6] ~= '1' then
    return 0
  end
  if not redis.call('ZSCORE', KEYS[5], owner) then
    -- Arrival order: the server's clock in microseconds, or one more than the last
    -- place's when that is not smaller.
    local arrival = tonumber(time[1]) * 1000000 + tonumber(time[2])
    local last = redis.call('ZRANGE', KEYS[5], -1, -1, 'WITHSCORES')[2]
    if last and tonumber(last) >= arrival then
      arrival = tonumber(last) + 1
    end
    redis.call('ZADD', KEYS[5], string.format('%.0f', arrival), owner)
  end
  redis.call('ZADD', KEYS[6], string.format('%.0f', now + ttl), owner)
  -- The queue lives as long as its latest place, plus the bound.
  local latest = tonumber(redis.call('ZRANGE', KEYS[6], -1, -1, 'WITHSCORES')[2])
  local keep = latest - now + grace
  redis.call('PEXPIRE', KEYS[5], string.format('%.0f', keep))
  redis.call('PEXPIRE', KEYS[6], string.format('%.0f', keep))
  mark(keep)
  return 0
end
if redis.call('ZSCORE', KEYS[1], owner) then
  local weight = tonumber(redis.call('HGET', KEYS[4], owner)) or 1
  if weight ~= permits or tonumber(redis.call('GET', KEYS[2])) ~= limit then
    return 0
  end
else
  local holders = redis.call('ZCARD', KEYS[1])
  if holders > 0 then
    local held = tonumber(redis.call('GET', KEYS[2]))
    if held and held ~= limit then
      return -held
    end
    if redis.call('EXISTS', KEYS[7]) == 0 then
      return false
    end
  end
  local first = redis.call('ZRANGE', KEYS[5], 0, 0)[1]
  if first and first ~= owner then
    return wait()
  end
  -- The permits held: one per holder, plus what the weighted ones hold beyond one.
  local used = holders
  if redis.call('EXISTS', KEYS[4]) == 1 then
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
    return wait()
  end
end
redis.call('ZADD', KEYS[1], string.format('%.0f', now + ttl), owner)
if permits > 1 then
  redis.call('HSET', KEYS[4], owner, ARGV[5])
end
if redis.call('ZREM', KEYS[5], owner) == 1 then
  redis.call('ZREM', KEYS[6], owner)
end
-- Every key lives until the latest permit expires, plus the bound; the mark at least as
-- long (a place may keep it longer).
local latest = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
local keep = latest - now + grace
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', keep))
redis.call('SET', KEYS[2], ARGV[3], 'PX', string.format('%.0f', keep))
redis.call('PEXPIRE', KEYS[4], string.format('%.0f', keep))
mark(keep)
-- Tokens as in acquire.lua: the server's clock in microseconds, or one more than the
-- last token when that is not smaller, so they grow across a failover too.
local token = tonumber(time[1]) * 1000000 + tonumber(time[2])
local last = tonumber(redis.call('GET', KEYS[3]))
if last and last >= token then
  token = last + 1
end
redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', string.format('%.0f', keep))
if redis.call('EXISTS', KEYS[5]) == 1 then
  redis.call(ARGV[7] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', KEYS[1] .. ':released', '')
end
return token

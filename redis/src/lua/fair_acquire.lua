-- fair_acquire.lua: a fair lock's attempt (`{ fair: true }`): take the lock when it is
-- free and this owner is first in its queue, else take or renew this owner's place at
-- the end of the queue.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fencing counter
-- KEYS[3]  the queue: a sorted set, member = owner token, score = when it first asked
--          (the server's clock in microseconds, made to grow)
-- KEYS[4]  the places' ends: a sorted set, member = owner token, score = when its place
--          runs out, in the server's milliseconds
-- KEYS[5]  the fair mark: lives while a fair handle holds the lock or waits for it (and
--          a small bound after); acquire.lua refuses handles that are not fair while it
--          stands (all share the lock key's {key} hash tag, so they live in one slot)
-- ARGV[1]  the owner token
-- ARGV[2]  the TTL, in milliseconds: of the hold, and of the place from this attempt
-- ARGV[3]  the TTL plus the small bound, in milliseconds (the counter's and mark's life)
-- ARGV[4]  '1' when the caller waits (a place is kept); anything else: a single try
--
-- Returns the fencing token (> 0) when taken; 0 when not (with this owner's place kept
-- if it waits); -1 when the lock is held by a handle that is not fair.
--
-- A place is a lease: an attempt renews it for the TTL, so a waiter that crashed or
-- stopped loses its place once its TTL has passed since its latest attempt; a waiter
-- that gives up loses it at once (fair_release.lua). A key this owner holds already is
-- this call applied a second time (see acquire.lua): answered as taken, TTL counted again.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local owner = ARGV[1]
-- Places that ran out leave the queue.
local gone = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)
for i = 1, #gone do
  redis.call('ZREM', KEYS[3], gone[i])
end
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
end
local held = redis.pcall('GET', KEYS[1])
if type(held) == 'table' and held.err then
  if string.sub(held.err, 1, 10) == 'WRONGTYPE ' then
    local kind = redis.call('TYPE', KEYS[1])['ok']
    return redis.error_reply('WRONGTYPE key ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a lock')
  end
  return held
end
-- Keeps the mark alive for at least `ms` from now.
local function mark(ms)
  if redis.call('PTTL', KEYS[5]) < ms then
    redis.call('SET', KEYS[5], '1', 'PX', ms)
  end
end
local function wait()
  if ARGV[4] ~= '1' then
    return 0
  end
  if not redis.call('ZSCORE', KEYS[3], owner) then
    -- Arrival order: the server's clock in microseconds, or one more than the last
    -- place's when that is not smaller.
    local arrival = tonumber(time[1]) * 1000000 + tonumber(time[2])
    local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')[2]
    if last and tonumber(last) >= arrival then
      arrival = tonumber(last) + 1
    end
    redis.call('ZADD', KEYS[3], string.format('%.0f', arrival), owner)
  end
  local ends = now + tonumber(ARGV[2])
  redis.call('ZADD', KEYS[4], string.format('%.0f', ends), owner)
  -- The queue lives as long as its latest place, plus the bound.
  local latest = tonumber(redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')[2])
  local keep = latest - now + tonumber(ARGV[3]) - tonumber(ARGV[2])
  redis.call('PEXPIRE', KEYS[3], keep)
  redis.call('PEXPIRE', KEYS[4], keep)
  mark(keep)
  return 0
end
if held and held ~= owner then
  if redis.call('EXISTS', KEYS[5]) == 0 then
    return -1
  end
  return wait()
end
if not held then
  local first = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if first and first ~= owner then
    return wait()
  end
end
redis.call('SET', KEYS[1], owner, 'PX', ARGV[2])
if redis.call('ZREM', KEYS[3], owner) == 1 then
  redis.call('ZREM', KEYS[4], owner)
end
mark(tonumber(ARGV[3]))
-- Tokens as in acquire.lua: the server's clock in microseconds, or one more than the
-- last token when that is not smaller, so they grow across a failover too.
local token = tonumber(time[1]) * 1000000 + tonumber(time[2])
local last = tonumber(redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', ARGV[3], 'GET'))
if last and last >= token then
  token = last + 1
  redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', ARGV[3])
end
return token

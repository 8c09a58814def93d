-- rwlock_acquire.lua: take a read-write lock for reading (shared) or writing (alone), and
-- mint the hold's fencing token. Phase-fair: a refused writer claims the lock, and new
-- readers stay out until it gets in, gives up (rwlock_release.lua) or its claim expires
-- (after the TTL, renewed by each attempt), so a stream of readers cannot starve it; a
-- refused reader waits in KEYS[5], and when a writer's hold ends the readers waiting then
-- take their turn (KEYS[6]): they enter past a writer's claim, and no writer enters before
-- they did, gave up or their turn ran out, so a stream of writers cannot starve readers.
--
-- KEYS[1]  the lock's holders: a sorted set, member = owner token, score = when that hold
--          expires, in the server's milliseconds (many readers, or one writer)
-- KEYS[2]  the writer: the owner token of the member of KEYS[1] that writes, if any
-- KEYS[3]  a waiting writer's claim: its owner token, expiring with the claim
-- KEYS[4]  the lock's fencing counter
-- KEYS[5]  the waiting readers: a sorted set, member = owner token, score = until when
--          (its TTL from its latest attempt)
-- KEYS[6]  the readers' turn: the same, for the readers waiting when a writer's hold ended
--          (all six share the lock key's {key} hash tag, so they live in one slot)
-- ARGV[1]  the owner token
-- ARGV[2]  the TTL, in milliseconds (of the hold, or of a refused writer's claim or a
--          refused reader's wait)
-- ARGV[3]  `read` or `write`
-- ARGV[4]  how long the keys outlive the latest hold, in milliseconds (a small bound)
--
-- Returns the fencing token (> 0) when taken; 0 when refused.
--
-- The clock is the server's (TIME), never the caller's.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local past = string.format('%.0f', now)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', past)
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', past)
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', past)
-- A writer whose hold ran out (no release told us): the readers waiting take their turn.
local writer = redis.call('GET', KEYS[2])
if writer and not redis.call('ZSCORE', KEYS[1], writer) then
  redis.call('DEL', KEYS[2])
  writer = false
  if redis.call('EXISTS', KEYS[5]) == 1 then
    redis.call('ZUNIONSTORE', KEYS[6], 2, KEYS[6], KEYS[5], 'AGGREGATE', 'MAX')
    redis.call('DEL', KEYS[5])
    local last = tonumber(redis.call('ZRANGE', KEYS[6], -1, -1, 'WITHSCORES')[2])
    redis.call('PEXPIRE', KEYS[6], string.format('%.0f', math.max(last - now, 1)))
  end
end
local until_ms = string.format('%.0f', now + tonumber(ARGV[2]))
-- A holder that holds this kind of hold already is this call applied a second time (see
-- acquire.lua): taken again, its expiry counted again, a new token. One that holds the
-- other kind is refused.
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  if (writer == ARGV[1]) ~= (ARGV[3] == 'write') then
    return 0
  end
else
  local holders = redis.call('ZCARD', KEYS[1])
  local claimant = redis.call('GET', KEYS[3])
  if ARGV[3] == 'read' then
    local in_turn = redis.call('ZSCORE', KEYS[6], ARGV[1])
    if writer or (claimant and not in_turn) then
      -- Waits for the next readers' turn (unless it is in this one already).
      if not in_turn then
        redis.call('ZADD', KEYS[5], until_ms, ARGV[1])
        local last = tonumber(redis.call('ZRANGE', KEYS[5], -1, -1, 'WITHSCORES')[2])
        redis.call('PEXPIRE', KEYS[5], string.format('%.0f', math.max(last - now, 1)))
      end
      return 0
    end
    redis.call('ZREM', KEYS[5], ARGV[1])
    redis.call('ZREM', KEYS[6], ARGV[1])
  elseif ARGV[3] == 'write' then
    if holders > 0 or (claimant and claimant ~= ARGV[1]) or redis.call('EXISTS', KEYS[6]) == 1 then
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
end
redis.call('ZADD', KEYS[1], until_ms, ARGV[1])
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

-- rwlock_release.lua: give back the owner's read or write hold, its claim as a waiting
-- writer and its place as a waiting reader, and tell waiters on `<KEYS[1]>:released`.
-- When the owner was the writer, the readers waiting now take their turn (see
-- rwlock_acquire.lua).
--
-- KEYS[1]  the lock's holders (see rwlock_acquire.lua)
-- KEYS[2]  the writer
-- KEYS[3]  a waiting writer's claim
-- KEYS[4]  the waiting readers
-- KEYS[5]  the readers' turn
-- ARGV[1]  the owner token
-- ARGV[2]  optional: SPUBLISH to publish on the key's shard (Redis Cluster, sharded
--          pub/sub, Redis 7); anything else or nothing: PUBLISH
--
-- Returns 1 when the owner held the lock (now given back), 0 otherwise. Publishes when a
-- hold, a claim or a reader's turn went (a writer giving up lets readers in), and only then.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))
local released = redis.call('ZREM', KEYS[1], ARGV[1])
local changed = released == 1
if redis.call('GET', KEYS[3]) == ARGV[1] then
  redis.call('DEL', KEYS[3])
  changed = true
end
redis.call('ZREM', KEYS[4], ARGV[1])
if redis.call('ZREM', KEYS[5], ARGV[1]) == 1 then
  changed = true
end
local writer = redis.call('GET', KEYS[2])
if writer == ARGV[1] or (writer and not redis.call('ZSCORE', KEYS[1], writer)) then
  -- The writer's hold ended (released now, or ran out): the waiting readers' turn.
  redis.call('DEL', KEYS[2])
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', string.format('%.0f', now))
  if redis.call('EXISTS', KEYS[4]) == 1 then
    redis.call('ZUNIONSTORE', KEYS[5], 2, KEYS[5], KEYS[4], 'AGGREGATE', 'MAX')
    redis.call('DEL', KEYS[4])
    local latest = tonumber(redis.call('ZRANGE', KEYS[5], -1, -1, 'WITHSCORES')[2])
    redis.call('PEXPIRE', KEYS[5], string.format('%.0f', math.max(latest - now, 1)))
  end
elseif redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
end
if changed then
  redis.call(ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', KEYS[1] .. ':released', '')
end
return released

-- rwlock_release.lua: give back the owner's read or write hold and its claim as a waiting
-- writer, and tell waiters on `<KEYS[1]>:released`.
--
-- KEYS[1]  the lock's holders (see rwlock_acquire.lua)
-- KEYS[2]  the writer
-- KEYS[3]  a waiting writer's claim
-- ARGV[1]  the owner token
-- ARGV[2]  optional: SPUBLISH to publish on the key's shard (Redis Cluster, sharded
--          pub/sub, Redis 7); anything else or nothing: PUBLISH
--
-- Returns 1 when the owner held the lock (now given back), 0 otherwise. Publishes when a
-- hold or a claim went (a writer giving up lets readers in), and only then.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))
local released = redis.call('ZREM', KEYS[1], ARGV[1])
local changed = released == 1
if redis.call('GET', KEYS[3]) == ARGV[1] then
  redis.call('DEL', KEYS[3])
  changed = true
end
if redis.call('GET', KEYS[2]) == ARGV[1] or redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
end
if changed then
  redis.call(ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', KEYS[1] .. ':released', '')
end
return released

-- semaphore_release.lua: give back the owner's permit, and tell waiters on
-- `<KEYS[1]>:released`.
--
-- KEYS[1]  the semaphore's holders (see semaphore_acquire.lua)
-- KEYS[2]  the semaphore's limit: it goes with the last holder
-- KEYS[3]  optional: the weighted holders' permits (see semaphore_acquire.lua)
-- KEYS[4..6] optional (with KEYS[3]): the semaphore's fair queue, places' ends and fair
--          mark (fair_semaphore_acquire.lua): an owner that waits in line gives up its
--          place, and the mark goes with the last fair holder or waiter
-- ARGV[1]  the owner token
-- ARGV[2]  optional: SPUBLISH to publish on the key's shard (Redis Cluster, sharded
--          pub/sub, Redis 7); anything else or nothing: PUBLISH
--
-- Returns 1 when the owner held a live permit (now given back), 0 otherwise. Waiters are
-- told when a permit was given back or a place given up; otherwise nothing is published.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))
local released = redis.call('ZREM', KEYS[1], ARGV[1])
if KEYS[3] then
  redis.call('HDEL', KEYS[3], ARGV[1])
end
local left = 0
if KEYS[6] and redis.call('ZREM', KEYS[4], ARGV[1]) == 1 then
  redis.call('ZREM', KEYS[5], ARGV[1])
  left = 1
end
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
  if KEYS[3] then
    redis.call('DEL', KEYS[3])
  end
  if KEYS[6] and redis.call('EXISTS', KEYS[4]) == 0 then
    redis.call('DEL', KEYS[5], KEYS[6])
  end
end
if released == 1 or left == 1 then
  redis.call(ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', KEYS[1] .. ':released', '')
end
return released

-- fair_release.lua: a fair lock's release, or a fair waiter giving up its place.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the queue (fair_acquire.lua's KEYS[3])
-- KEYS[3]  the places' ends (fair_acquire.lua's KEYS[4])
-- KEYS[4]  the fair mark (fair_acquire.lua's KEYS[5])
-- ARGV[1]  the owner token
-- ARGV[2]  optional: SPUBLISH to publish on the key's shard (Redis Cluster); else PUBLISH
--
-- Returns 1 when the owner held the lock and it is free now; 0 otherwise. Either way an
-- owner's place in the queue is given up. Waiters are told on `<lock key>:released`
-- when the lock is freed or a place is given up (the next in line may go now). The mark
-- goes with the last fair holder or waiter.
local publish = ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH'
local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released = 1
end
local left = redis.call('ZREM', KEYS[2], ARGV[1])
if left == 1 then
  redis.call('ZREM', KEYS[3], ARGV[1])
end
if released == 1 or left == 1 then
  if redis.call('EXISTS', KEYS[2]) == 0 and redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('DEL', KEYS[3], KEYS[4])
  end
  redis.call(publish, KEYS[1] .. ':released', '')
end
return released

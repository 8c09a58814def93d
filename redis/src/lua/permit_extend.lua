-- permit_extend.lua: set a new expiry on the owner's hold of a semaphore or read-write
-- lock, if it still has one, and keep the keys that go with the holders alive as long.
--
-- KEYS[1]  the holders: a sorted set, member = owner token, score = expiry in the
--          server's milliseconds (see semaphore_acquire.lua, rwlock_acquire.lua)
-- KEYS[2..] the keys that live as long as the holders: a semaphore's limit and fencing
--          counter, or a read-write lock's writer and fencing counter
-- ARGV[1]  the owner token
-- ARGV[2]  the new TTL from now, in milliseconds
-- ARGV[3]  how long the keys outlive the latest hold, in milliseconds (a small bound)
-- ARGV[4]  optional: 'fair' when the last of KEYS is the semaphore's fair mark
--          (fair_semaphore_acquire.lua), which is then kept at least as long if it
--          stands (a waiter's place may keep it longer; a semaphore without one has none).
--          Unlike extend.lua's, it is never made here: this script cannot tell a fair
--          hold from a plain one, and a fair hold's mark, set with the holders' expiry
--          plus the same bound, stands as long as the hold does.
--
-- Returns 1 when extended, 0 when the owner holds nothing live.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local expires = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expires or tonumber(expires) <= now then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
local latest = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
local keep = string.format('%.0f', latest - now + tonumber(ARGV[3]))
local n = #KEYS
if ARGV[4] == 'fair' then
  local left = redis.call('PTTL', KEYS[n])
  if left > 0 and left < tonumber(keep) then
    redis.call('PEXPIRE', KEYS[n], keep)
  end
  n = n - 1
end
for i = 1, n do
  redis.call('PEXPIRE', KEYS[i], keep)
end
return 1

-- permit_remaining.lua: how long the owner's hold of a semaphore or read-write lock has left.
--
-- KEYS[1]  the holders: a sorted set, member = owner token, score = expiry in the
--          server's milliseconds (see semaphore_acquire.lua, rwlock_acquire.lua)
-- ARGV[1]  the owner token
--
-- Returns the milliseconds left (> 0), or -1 when the owner holds nothing live.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local expires = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expires or tonumber(expires) <= now then
  return -1
end
return tonumber(expires) - now

-- permit_count.lua: how many holds of a semaphore or read-write lock are live now.
--
-- KEYS[1]  the holders: a sorted set, member = owner token, score = expiry in the
--          server's milliseconds (see semaphore_acquire.lua, rwlock_acquire.lua)
--
-- Returns the number of holders whose expiry is still ahead, by the server's clock.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%.0f', now), '+inf')

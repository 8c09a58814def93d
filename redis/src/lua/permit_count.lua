-- permit_count.lua: how many holds of a semaphore or read-write lock are live now; for
-- a semaphore, the permits they hold.
--
-- KEYS[1]  the holders: a sorted set, member = owner token, score = expiry in the
--          server's milliseconds (see semaphore_acquire.lua, rwlock_acquire.lua)
-- KEYS[2]  optional: a semaphore's weighted holders' permits (see semaphore_acquire.lua)
--
-- Returns the number of live holders (their expiry still ahead, by the server's clock),
-- each weighted holder counted for its permits.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local live = '(' .. string.format('%.0f', now)
local count = redis.call('ZCOUNT', KEYS[1], live, '+inf')
if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then
  local weights = redis.call('HGETALL', KEYS[2])
  for i = 1, #weights, 2 do
    local expires = redis.call('ZSCORE', KEYS[1], weights[i])
    if expires and tonumber(expires) > now then
      count = count + tonumber(weights[i + 1]) - 1
    end
  end
end
return count

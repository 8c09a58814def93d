-- extend.lua: set a new expiry only if the owner still holds the lock (compare-and-extend),
-- and keep the lock's fencing counter alive as long.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fencing counter
-- KEYS[3]  optional, sent for an election's hold only: the value kept with it
--          (`<lock key>:value`, proclaim.lua), which then lives as long as the counter
-- ARGV[1]  the owner token
-- ARGV[2]  the new TTL from now, in milliseconds
-- ARGV[3]  how long the fencing counter lives from now, in milliseconds
--
-- Returns 1 when extended, 0 when the key is free or someone else holds it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  if KEYS[3] then
    redis.call('PEXPIRE', KEYS[3], ARGV[3])
  end
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0

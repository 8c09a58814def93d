-- extend.lua: set a new expiry only if the owner still holds the lock (compare-and-extend),
-- and keep the lock's fencing counter alive as long.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fencing counter
-- KEYS[3]  optional, sent for an election's hold: the value kept with it
--          (`<lock key>:value`, proclaim.lua), which then lives as long as the counter;
--          for a fair hold (ARGV[4]): its fair mark (`<lock key>:fair`, fair_acquire.lua),
--          which then lives at least as long (a waiter's place may keep it longer)
-- ARGV[1]  the owner token
-- ARGV[2]  the new TTL from now, in milliseconds
-- ARGV[3]  how long the fencing counter lives from now, in milliseconds
-- ARGV[4]  optional: 'fair' when KEYS[3] is a fair mark
--
-- Returns 1 when extended, 0 when the key is free or someone else holds it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  if ARGV[4] == 'fair' then
    if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[3]) then
      redis.call('SET', KEYS[3], '1', 'PX', ARGV[3])
    end
  elseif KEYS[3] then
    redis.call('PEXPIRE', KEYS[3], ARGV[3])
  end
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0

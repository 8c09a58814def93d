-- force_release.lua: free a lock whoever holds it (the operator's `locksmith release
-- --force`), wake its waiters, and say what was there.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fencing counter
-- KEYS[3]  optional: the value kept with the hold (`<lock key>:value`, proclaim.lua),
--          deleted with it (and a leftover one when nobody held the lock)
--
-- Returns false when nobody held the lock, else { owner, remaining ms, fencing counter }.
if KEYS[3] then
  redis.call('DEL', KEYS[3])
end
local owner = redis.call('GET', KEYS[1])
if not owner then
  return false
end
local remaining = redis.call('PTTL', KEYS[1])
local fence = redis.call('GET', KEYS[2])
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[1] .. ':released', '')
return { owner, remaining, fence or '' }

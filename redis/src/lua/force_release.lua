-- force_release.lua: free a lock whoever holds it (the operator's `locksmith release
-- --force`), wake its waiters, and say what was there.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fencing counter
--
-- Returns false when nobody held the lock, else { owner, remaining ms, fencing counter }.
local owner = redis.call('GET', KEYS[1])
if not owner then
  return false
end
local remaining = redis.call('PTTL', KEYS[1])
local fence = redis.call('GET', KEYS[2])
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[1] .. ':released', '')
return { owner, remaining, fence or '' }

-- release.lua: delete the lock only if the owner still holds it (compare-and-delete),
-- and tell waiters on `<lock key>:released`.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner token
--
-- Returns 1 when released, 0 when the key is free or someone else holds it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[1] .. ':released', '')
  return 1
end
return 0

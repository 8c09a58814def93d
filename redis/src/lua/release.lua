-- release.lua: delete the lock only if the owner still holds it (compare-and-delete),
-- and tell waiters on `<lock key>:released`.
--
-- KEYS[1]  the lock key
-- KEYS[2]  optional, sent for an election's hold only: the value kept with it
--          (`<lock key>:value`, proclaim.lua), deleted with the lock
-- ARGV[1]  the owner token
-- ARGV[2]  optional: SPUBLISH to publish on the key's shard (Redis Cluster, sharded
--          pub/sub, Redis 7); anything else or nothing: PUBLISH
--
-- Returns 1 when released, 0 when the key is free or someone else holds it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if KEYS[2] then
    redis.call('DEL', KEYS[1], KEYS[2])
  else
    redis.call('DEL', KEYS[1])
  end
  redis.call(ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', KEYS[1] .. ':released', '')
  return 1
end
return 0

-- held_by.lua: whether the owner holds the lock, compared on the server (for clients
-- that reinterpret the string GET returns, such as REST clients that parse JSON).
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner token
--
-- Returns 1 when the owner holds the lock, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return 1
end
return 0

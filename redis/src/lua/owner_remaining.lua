-- owner_remaining.lua: how long the owner's own lock has left, in one question (a hold's
-- due check; asking "is it mine?" and then "how long does the key have?" can be fooled by
-- a hand-over between the two).
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner token
--
-- Returns the milliseconds left (> 0), or -1 when the owner does not hold the lock.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -1
end
local left = redis.call('PTTL', KEYS[1])
if left <= 0 then
  return -1
end
return left

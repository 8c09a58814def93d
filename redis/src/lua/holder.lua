-- holder.lua: who holds a plain lock, with its fencing token, its time left and the value
-- it proclaimed (proclaim.lua): an election's leader, as a store's `holder(key)` answers.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fencing counter: the token its holder's acquire minted (acquire.lua)
-- KEYS[3]  the value kept with the hold: a hash of owner, token, seq, value (proclaim.lua)
--
-- Returns false when nobody holds the lock, else { '=' .. owner, milliseconds left, the
-- fencing counter or '', '=' .. value or '' when the holder proclaimed none }. The strings
-- carry a '=' in front so that a client that parses replies as JSON (@upstash/redis) leaves
-- them as they are.
--
-- A kept value is the hold's while its owner holds the lock and, when it was kept with a
-- token, the counter still has that token (so not a later hold of the same owner's). One
-- that is neither is deleted here: the hash expires a second after its hold (proclaim.lua),
-- but a later hold may come within that second, and a hold released by a plain lock's
-- release (or an earlier version's, which did not know the hash) leaves it to its expiry.
local owner = redis.call('GET', KEYS[1])
local fence = redis.call('GET', KEYS[2]) or ''
local kept = redis.call('HMGET', KEYS[3], 'owner', 'token', 'value')
local current = owner and kept[1] == owner and (kept[2] == '' or kept[2] == fence) and kept[3]
if kept[1] and not current then
  redis.call('DEL', KEYS[3])
end
if not owner then
  return false
end
local value = ''
if current then
  value = '=' .. kept[3]
end
return { '=' .. owner, redis.call('PTTL', KEYS[1]), fence, value }

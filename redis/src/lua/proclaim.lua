-- proclaim.lua: keep a value with the owner's live hold of a plain lock (an election's
-- leader proclaims it), unless the hold keeps one of a sequence number at least this
-- one's: a late proclaim never undoes a newer one.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fencing counter: the token its holder's acquire minted (acquire.lua)
-- KEYS[3]  the value kept with the hold: a hash of owner, token, seq, value
-- ARGV[1]  the owner token
-- ARGV[2]  the value
-- ARGV[3]  its sequence number (a positive whole number)
-- ARGV[4]  '1' when the store mints fencing tokens: the value is kept for the hold of the
--          token on the counter, not for a later hold of the same owner; else (a store with
--          `fencing: false`) for the owner's hold
--
-- Returns 1 when the owner holds the lock, 0 when not (nothing is kept).
--
-- The hash has no expiry of its own: release.lua and extend.lua do not know it, and a hold
-- may be extended for ever. It is the hold's while owner and token are the hold's (see
-- holder.lua, which answers it only then); one left by a hold that is over is deleted by
-- the next holder.lua or proclaim.lua on the key.
local owner = redis.call('GET', KEYS[1])
local fence = redis.call('GET', KEYS[2]) or ''
local kept = redis.call('HMGET', KEYS[3], 'owner', 'token', 'seq')
local current = owner and kept[1] == owner and (kept[2] == '' or kept[2] == fence)
if owner ~= ARGV[1] then
  if kept[1] and not current then
    redis.call('DEL', KEYS[3])
  end
  return 0
end
if current and tonumber(kept[3]) and tonumber(kept[3]) >= tonumber(ARGV[3]) then
  return 1
end
local token = ''
if ARGV[4] == '1' then
  token = fence
end
redis.call('HSET', KEYS[3], 'owner', ARGV[1], 'token', token, 'seq', ARGV[3], 'value', ARGV[2])
return 1

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
-- ARGV[5]  how much longer than the hold the value lives, in milliseconds: the fencing
--          counter's grace (FENCE_GRACE_MS)
--
-- Returns 1 when the owner holds the lock, 0 when not (nothing is kept).
--
-- The hash expires with the hold: its expiry is the lock's time left plus the counter's
-- grace. An election's extend moves it as it moves the counter's (extend.lua) and its
-- release deletes it (release.lua), so a hold that runs out or is released takes it
-- along; a plain lock's extend and release do not send it (they cost what they did), so
-- its value goes when the TTL it had when proclaimed runs out. It is the hold's only
-- while owner and token are the hold's (see holder.lua, which answers it only then);
-- one left by a hold that is over is deleted by the next holder.lua or proclaim.lua on
-- the key, if its expiry has not taken it first.
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
if not (current and tonumber(kept[3]) and tonumber(kept[3]) >= tonumber(ARGV[3])) then
  local token = ''
  if ARGV[4] == '1' then
    token = fence
  end
  redis.call('HSET', KEYS[3], 'owner', ARGV[1], 'token', token, 'seq', ARGV[3], 'value', ARGV[2])
end
-- A lock key without an expiry is not locksmith's (holder() says so): the value keeps none.
local left = redis.call('PTTL', KEYS[1])
if left > 0 then
  redis.call('PEXPIRE', KEYS[3], left + tonumber(ARGV[5]))
end
return 1

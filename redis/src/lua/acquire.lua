-- acquire.lua: take a lock if nobody holds it, and mint the hold's fencing token.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fencing counter (same hash slot: both share the {key} hash tag)
-- ARGV[1]  the owner token
-- ARGV[2]  the TTL, in milliseconds
-- ARGV[3]  how long the counter outlives its last use, in milliseconds
--
-- Returns the fencing token (> 0) when taken, 0 when someone holds the key.
-- The token is max(last token + 1, server time in microseconds): it grows with every
-- hold of the key, and still grows after an idle counter has expired.
if redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then
  local now = redis.call('TIME')
  local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local last = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  local token = math.max(last + 1, floor)
  redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', ARGV[3])
  return token
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'string' then
  return redis.error_reply('WRONGTYPE key ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a lock')
end
return 0

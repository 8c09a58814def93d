-- acquire.lua: take a lock if nobody holds it, and mint the hold's fencing token.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fencing counter (same hash slot: both share the {key} hash tag)
-- KEYS[3]  optional: the lock's fair mark (fair_acquire.lua): while it stands, fair
--          handles hold the lock or wait for it, and this handle, not fair, is refused
-- ARGV[1]  the owner token
-- ARGV[2]  the TTL, in milliseconds
-- ARGV[3]  how long the fencing counter lives from now, in milliseconds: the TTL plus
--          a small bound, so the counter goes soon after the lock
--
-- Returns the fencing token (> 0) when taken, 0 when someone else holds the key, -1 when
-- the key is fair (KEYS[3]).
--
-- A key this owner holds already is this call applied a second time: core never sends
-- an acquire with a token that holds the key (a token is fresh per acquire, and kept
-- only after attempts answered "held"), so only a client that sent the script again
-- (ioredis resends the commands a lost connection left unanswered) finds it there. It is
-- answered as taken, with the TTL counted again and a new token, so the second answer
-- is as good as the first that was lost, and the hold is not left to nobody.
--
-- SET ... NX GET takes the key only if it is free, answers who held it, and fails with
-- WRONGTYPE on a key that is not a string, in one command (Redis 7).
if KEYS[3] and redis.call('EXISTS', KEYS[3]) == 1 then
  return -1
end
local held = redis.pcall('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX', 'GET')
if type(held) == 'table' and held.err then
  if string.sub(held.err, 1, 10) == 'WRONGTYPE ' then
    local kind = redis.call('TYPE', KEYS[1])['ok']
    return redis.error_reply('WRONGTYPE key ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a lock')
  end
  -- OOM, READONLY, LOADING, ...: the server's own error, as it said it.
  return held
end
if held then
  if held ~= ARGV[1] then
    return 0
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
-- Tokens are the server's clock in microseconds (TIME), or one more than the key's last
-- token when that is not smaller (two holds within a microsecond, a clock stepped back).
-- So they grow on one server, and on a master that took over after a failover they
-- grow past every token the old master gave, even one whose counter update was lost
-- in the failover (asynchronous replication), as long as the new master's clock is not
-- behind the old one's by more than the time between the two holds. The counter lives
-- as long as its lock plus a small bound.
-- SET ... GET writes the new token and answers the last one in one command; the rare
-- token that must be last+1 is written again.
local now = redis.call('TIME')
local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
local last = tonumber(redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', ARGV[3], 'GET'))
if last and last >= token then
  token = last + 1
  redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', ARGV[3])
end
return token

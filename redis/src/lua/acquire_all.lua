-- acquire_all.lua: take several locks at once, every one or none, and mint each hold's
-- fencing token as acquire.lua does.
--
-- KEYS[3i-2]  lock i's key (i = 1..n, in the lock's canonical order)
-- KEYS[3i-1]  lock i's fencing counter
-- KEYS[3i]    lock i's fair mark (fair_acquire.lua): a lock that fair handles hold or
--             wait for counts as held, so lockAll() never takes one past its queue
-- ARGV[1]     the owner token
-- ARGV[2]     the TTL, in milliseconds
-- ARGV[3]     how long each fencing counter lives from now, in milliseconds
--
-- Returns the tokens, space-separated, when every lock was taken; -i when lock i is
-- held by someone else (then this call took nothing). A key that is not a lock is an
-- error, as acquire.lua's. Keys this owner holds already (this call applied a second
-- time, see acquire.lua) are taken again, their TTLs counted again, with new tokens.
local n = #KEYS / 3
for i = 1, n do
  local key = KEYS[3 * i - 2]
  local held = redis.pcall('GET', key)
  if type(held) == 'table' and held.err then
    if string.sub(held.err, 1, 10) == 'WRONGTYPE ' then
      local kind = redis.call('TYPE', key)['ok']
      return redis.error_reply('WRONGTYPE key ' .. key .. ' holds a ' .. kind .. ', not a lock')
    end
    return held
  end
  if (held and held ~= ARGV[1]) or redis.call('EXISTS', KEYS[3 * i]) == 1 then
    return -i
  end
end
local now = redis.call('TIME')
local base = tonumber(now[1]) * 1000000 + tonumber(now[2])
local tokens = {}
for i = 1, n do
  redis.call('SET', KEYS[3 * i - 2], ARGV[1], 'PX', ARGV[2])
  local token = base
  local last = tonumber(redis.call('SET', KEYS[3 * i - 1], string.format('%.0f', token), 'PX', ARGV[3], 'GET'))
  if last and last >= token then
    token = last + 1
    redis.call('SET', KEYS[3 * i - 1], string.format('%.0f', token), 'PX', ARGV[3])
  end
  tokens[i] = string.format('%.0f', token)
end
return table.concat(tokens, ' ')

-- The Redis side of the issue 19 comparison (bench/redis.sh): a token
-- bucket as a Redis user writes it, the equivalent of ratelimit's.
--
--   EVALSHA <sha> 1 <bucket key> <rate> <period ms> <capacity> <count>
--
-- The bucket holds `rate` tokens per `period` ms, at most `capacity`, and
-- starts full. A call refills it for the time since its last write (the
-- server's clock, TIME, read once in the script; never backwards), then
-- takes `count` tokens if that many are there. Returns {ok (1 or 0),
-- remaining tokens (as text: Redis truncates a Lua number to an integer)}.
-- A refusal writes nothing (as ratelimit's refusal); a grant writes the
-- hash {v = tokens, t = ms} and expires it when the bucket would be full
-- again (an idle bucket is the same as none, as an idle entry of
-- ratelimit's memory storage is; Redis users set the expiry so that keys do
-- not pile up).
local rate = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local capacity = tonumber(ARGV[3])
local count = tonumber(ARGV[4])

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000

local stored = redis.call('HMGET', KEYS[1], 'v', 't')
local tokens = tonumber(stored[1])
local ts = tonumber(stored[2])
if tokens == nil or ts == nil then
  tokens = capacity
  ts = now
end
if now < ts then now = ts end
tokens = math.min(capacity, tokens + (now - ts) * rate / period)

if tokens < count then
  return {0, tostring(tokens)}
end
tokens = tokens - count
redis.call('HSET', KEYS[1], 'v', string.format('%.6f', tokens), 't', string.format('%.3f', now))
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) * period / rate) + 1)
return {1, tostring(tokens)}

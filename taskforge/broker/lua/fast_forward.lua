-- fast_forward: make scheduled and retrying jobs due up to `advance_ms` from now due now.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] advance_ms
-- For app.drain(advance=...) in tests: time cannot be faked inside Redis, so
-- the due times move instead. Returns how many jobs were moved.
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', SCHEDULED, '-inf', now + tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  redis.call('ZADD', SCHEDULED, now, id)
end
return #ids

-- fast_forward: make scheduled and retrying jobs due up to ARGV[2] ms from now due now.
-- For app.drain(advance=...) in tests: time cannot be faked inside Redis, so
-- the due times move instead. Returns how many jobs were moved.
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', SCHEDULED, '-inf', now + tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  redis.call('ZADD', SCHEDULED, now, id)
end
return #ids

-- expire_owner: the claims of a worker proved dead (its processes no longer exist) expire now,
-- so the reclaim that follows takes them back at once instead of after their lease.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] owner           the prefix of every claim token of the dead worker
-- Returns the number of claims expired.
-- Only running jobs whose token starts with `owner` are touched: the claims
-- of live workers never carry it. The lease moves to the past and nothing
-- else changes: `reclaim` then does what it does for any expired claim
-- (back in line with a worker loss counted, or dead once its losses are spent; a
-- job of a batch it never started goes back with its attempt refunded), and
-- clears the token, so a late write from the dead worker is fenced.
local owner = ARGV[2]
if #owner < 8 then
  return 0
end
local now = now_ms()
local n = 0
for _, id in ipairs(redis.call('ZRANGE', RUNNING, 0, -1)) do
  local f = redis.pcall('HMGET', job_key(id), 'token', 'state')
  if type(f) == 'table' and not f.err and f[2] == 'running' and type(f[1]) == 'string'
      and string.sub(f[1], 1, #owner) == owner then
    redis.call('ZADD', RUNNING, 'XX', now - 1, id)
    n = n + 1
  end
end
return n

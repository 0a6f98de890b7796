-- peek: promote due scheduled jobs, then report the best ready job's score.
-- ARGV[2] promote limit
-- Returns {head score or -1, ms until the next scheduled job is due or -1}.
-- A worker serving several queues peeks them all (one pipelined round trip)
-- and claims from the queue whose head has the highest priority, so strict
-- priority holds across queues, not only within one.
local now = now_ms()
promote_due(now, tonumber(ARGV[2]))
local head = redis.call('ZRANGE', PENDING, 0, 0, 'WITHSCORES')
local wait = -1
local nxt = redis.call('ZRANGE', SCHEDULED, 0, 0, 'WITHSCORES')
if #nxt > 0 then
  wait = math.max(0, tonumber(nxt[2]) - now)
end
if #head > 0 then
  return {head[2], wait}
end
return {-1, wait}

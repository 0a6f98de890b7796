-- peek: promote due scheduled jobs, then report the best ready job's score.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] promote_limit   at most this many due jobs promoted per call
-- Returns {score of the best job allowed to start now or -1 (none, or the queue is paused),
--          ms until the next scheduled job is due (or a limited task may start) or -1}.
-- A worker serving several queues peeks them all (one pipelined round trip)
-- and claims from the queue whose head has the highest priority, so strict
-- priority holds across queues, not only within one.
if redis.call('EXISTS', PAUSED) == 1 then
  return {-1, -1}  -- paused: nothing may start here (resume wakes the waiters)
end
local now = now_ms()
local groups = redis.call('HKEYS', LIMITS)
promote_due(now, tonumber(ARGV[2]))
release_held(now, tonumber(ARGV[2]))
local _, _, blocked_wait, head_score = best_ready(now, groups, true)
local wait = -1
local nxt = redis.call('ZRANGE', SCHEDULED, 0, 0, 'WITHSCORES')
if #nxt > 0 then
  wait = math.max(0, tonumber(nxt[2]) - now)
end
if blocked_wait >= 0 and (wait < 0 or blocked_wait < wait) then
  wait = blocked_wait
end
if head_score then
  return {tostring(head_score), wait}
end
return {-1, wait}

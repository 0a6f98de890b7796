-- pause: stop or restart the starts of one queue (app.pause / app.resume).
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] on              '1' pause, '' resume
-- Returns 1 when the queue's state changed, 0 when it already was so.
-- Every claim and peek reads the pause first, so a pause
-- reaches each worker at its next claim; jobs already claimed in a batch
-- still start.  Resume wakes every waiting worker, which claims at once.
if ARGV[2] == '1' then
  if redis.call('EXISTS', PAUSED) == 1 then
    return 0
  end
  redis.call('SET', PAUSED, now_ms())
  return 1
end
if redis.call('DEL', PAUSED) == 0 then
  return 0
end
wake(WAKE_CAP)
return 1

-- cancel: a job that has not started (pending, scheduled, retrying, deferred) will never run.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] retention_ms
-- Returns 1 (cancelled), 0 (running or finished: too late), -1 (no such job).
local id = ARGV[2]
local jk = job_key(id)
if not is_job(jk) then
  return -1
end
return cancel_unstarted(id, jk, redis.call('HGET', jk, 'state'), tonumber(ARGV[3]))

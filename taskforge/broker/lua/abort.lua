-- abort: stop a job. Not started yet: cancelled at once, as by cancel. Running:
-- flagged; the supervisor running it sees the flag at its next lease renewal,
-- kills the child and records the job cancelled (abandon.lua).  Either way the
-- job's failure field says 'aborted' (a plain cancel writes none).
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] retention_ms
-- Returns 1 (cancelled now), 2 (running: will be stopped), 0 (finished), -1 (no such job).
local id = ARGV[2]
local jk = job_key(id)
if not is_job(jk) then
  return -1
end
local state = redis.call('HGET', jk, 'state')
if state == 'running' then
  redis.call('HSET', jk, 'abort', '1')
  return 2
end
return cancel_unstarted(id, jk, state, tonumber(ARGV[3]), {'failure', 'aborted', 'error_type', 'taskforge.errors.Aborted'})

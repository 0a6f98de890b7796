-- abort: stop a job. Not started yet: cancelled at once, like cancel. Running:
-- flagged; the supervisor running it sees the flag at its next lease renewal,
-- kills the child and records the job cancelled (abandon.lua).
-- ARGV[2] id   ARGV[3] retention_ms
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
if state == 'pending' then
  redis.call('ZREM', pending_key(jk), id)
elseif state == 'scheduled' or state == 'retrying' then
  redis.call('ZREM', SCHEDULED, id)
else
  return 0
end
finish(id, jk, 'cancelled', now_ms(), tonumber(ARGV[3]))
return 1

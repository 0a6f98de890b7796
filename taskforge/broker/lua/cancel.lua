-- cancel: a job that has not started (pending, scheduled, retrying) will never run.
-- ARGV[2] id   ARGV[3] retention_ms
-- Returns 1 (cancelled), 0 (running or finished: too late), -1 (no such job).
local id = ARGV[2]
local jk = job_key(id)
if not is_job(jk) then
  return -1
end
local state = redis.call('HGET', jk, 'state')
if state == 'pending' then
  redis.call('ZREM', pending_key(jk), id)
elseif state == 'scheduled' or state == 'retrying' then
  redis.call('ZREM', SCHEDULED, id)
else
  return 0
end
finish(id, jk, 'cancelled', now_ms(), tonumber(ARGV[3]))
return 1

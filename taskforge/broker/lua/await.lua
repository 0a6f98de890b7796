-- await: mark a job as waited on and return its state, in one step, so a
-- finish that happens right after this call is sure to push the done list.
-- ARGV[2] id
-- Returns the state, or false when there is no such job.
local jk = job_key(ARGV[2])
if not is_job(jk) then
  return false
end
redis.call('HSET', jk, 'waiting', '1')
return redis.call('HGET', jk, 'state')

-- await: mark a job as waited on and return its state, in one step, so a
-- finish that happens right after this call is sure to push the done list.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- Returns the state, or false when there is no such job.
local jk = job_key(ARGV[2])
if not is_job(jk) then
  return false
end
redis.call('HSET', jk, 'waiting', '1')
return redis.call('HGET', jk, 'state')

-- depend: list a job that waits for this one (depends_on), unless this one has ended already.
-- Its final transition then leaves its state in the queue's `depbox` (lib/finish.lua), for
-- the worker or the reconciler to report to each job listed (dep_report).
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id          the job depended on
-- ARGV[3] dependent       the waiting job, "queue<TAB>id"
-- Returns the job's state when it has ended (succeeded, dead, cancelled: the caller reports it
-- at once), 'waiting' once listed, '' when there is no such job.
local jk = job_key(ARGV[2])
if not is_job(jk) then
  return ''
end
local state = redis.call('HGET', jk, 'state')
if state == 'succeeded' or state == 'dead' or state == 'cancelled' then
  return state
end
redis.call('SADD', PREFIX .. 'dependents:' .. ARGV[2], ARGV[3])
redis.call('HSET', jk, 'dependents', '1')
return 'waiting'

-- requeue: give a claimed job back to its queue (graceful shutdown), without using an attempt.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] token           the claim token
-- ARGV[4] interrupted     '' for a job that never started (unrun); else why its run was cut short
-- Returns 1, or 0 when the claim is no longer ours.
-- The job keeps its original place in line: it was not its fault. A run cut
-- short (a shutdown's grace ran out) is recorded as interrupted: `interrupted`
-- counts it and `error` says so, and it uses no attempt either.
local id, token, why = ARGV[2], ARGV[3], ARGV[4]
local jk = job_key(id)
if not claim_guard(jk, token) then
  return 0
end
need_zsets(PENDING)
need_seq()
need_limits()
leave_running(id, jk)
redis.call('HINCRBY', jk, 'attempts', -1)
if why ~= '' then
  local runs = tonumber(redis.call('HGET', jk, 'interrupted')) or 0
  redis.call('HSET', jk, 'interrupted', runs + 1, 'failure', 'interrupted', 'error', why,
    'error_type', 'taskforge.errors.Interrupted')
end
restore_pending(id, jk)
wake(1)
return 1

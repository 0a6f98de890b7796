-- requeue: give a claimed job back unrun (graceful shutdown), without using an attempt.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] token           the claim token
-- Returns 1, or 0 when the claim is no longer ours.
-- The job keeps its original place in line: it was not its fault.
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
if not claim_guard(jk, token) then
  return 0
end
need_zsets(PENDING)
need_seq()
need_limits()
leave_running(id, jk)
redis.call('HINCRBY', jk, 'attempts', -1)
restore_pending(id, jk)
wake(1)
return 1

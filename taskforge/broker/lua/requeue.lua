-- requeue: give a claimed job back unrun (graceful shutdown), without using an attempt.
-- ARGV[2] id   ARGV[3] claim token
-- Returns 1, or 0 when the claim is no longer ours.
-- The job keeps its original place in line: it was not its fault.
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
if redis.call('HGET', jk, 'token') ~= token or redis.call('HGET', jk, 'state') ~= 'running' then
  return 0
end
need_zsets(PENDING)
need_seq()
need_limits()
leave_running(id, jk)
release_claim(token)
redis.call('HINCRBY', jk, 'attempts', -1)
restore_pending(id, jk)
wake(1)
return 1

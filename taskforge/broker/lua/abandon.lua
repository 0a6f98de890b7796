-- abandon: the supervisor killed a running job because it was aborted.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] token           the claim token
-- ARGV[4] retention_ms
-- Returns 1, or 0 when the claim is no longer ours (fenced).
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
if not claim_guard(jk, token) then
  return 0
end
leave_running(id, jk)
redis.call('HSET', jk, 'failure', 'aborted', 'error', 'Aborted: stopped while running by JobHandle.abort()',
  'error_type', 'taskforge.errors.Aborted')
finish(id, jk, 'cancelled', now_ms(), tonumber(ARGV[4]))
return 1

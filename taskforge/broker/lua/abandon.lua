-- abandon: the supervisor killed a running job because it was aborted.
-- ARGV[2] id   ARGV[3] claim token   ARGV[4] retention_ms
-- Returns 1, or 0 when the claim is no longer ours (fenced).
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
if redis.call('HGET', jk, 'token') ~= token or redis.call('HGET', jk, 'state') ~= 'running' then
  return 0
end
leave_running(id, jk)
release_claim(token)
redis.call('HSET', jk, 'error', 'Aborted: stopped while running by JobHandle.abort()')
finish(id, jk, 'cancelled', now_ms(), tonumber(ARGV[4]))
return 1

-- progress: a running task reports how far it got.
-- ARGV[2] id   ARGV[3] claim token   ARGV[4] fraction 0..1   ARGV[5] message ('' = none)
-- Returns 1, or 0 when the claim is no longer ours (fenced, nothing written).
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
if redis.call('HGET', jk, 'token') ~= token or redis.call('HGET', jk, 'state') ~= 'running' then
  return 0
end
redis.call('HSET', jk, 'progress', ARGV[4], 'progress_message', ARGV[5])
return 1

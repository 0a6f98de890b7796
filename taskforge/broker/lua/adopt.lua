-- adopt: a job sent by name takes max_attempts and timeout from the worker's task.
-- ARGV[2] id   ARGV[3] claim token   ARGV[4] max_attempts   ARGV[5] timeout_ms ('' = none)
-- Returns 1, or 0 when the claim is no longer ours (nothing written: a job
-- record that expired meanwhile is never recreated).
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
if redis.call('HGET', jk, 'token') ~= token or redis.call('HGET', jk, 'state') ~= 'running' then
  return 0
end
redis.call('HSET', jk, 'max_attempts', ARGV[4], 'timeout', ARGV[5])
redis.call('HDEL', jk, 'inherit')
return 1

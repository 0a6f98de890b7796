-- adopt: a job sent by name takes max_attempts, max_worker_losses and timeout from the worker's task.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] token           the claim token
-- ARGV[4] max_attempts
-- ARGV[5] timeout_ms      ('' = none)
-- ARGV[6] max_worker_losses ('' = the default, 2: the field is left out)
-- Returns 1, or 0 when the claim is no longer ours (nothing written: a job
-- record that expired meanwhile is never recreated).
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
if not claim_guard(jk, token) then
  return 0
end
redis.call('HSET', jk, 'max_attempts', ARGV[4], 'timeout', ARGV[5])
redis.call('HDEL', jk, 'inherit')
if ARGV[6] == '' then
  redis.call('HDEL', jk, 'max_worker_losses')
else
  redis.call('HSET', jk, 'max_worker_losses', ARGV[6])
end
return 1

-- store_step: a running job's durable step finished: its result is kept with the job.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] token           the claim token
-- ARGV[4] name            the step's name
-- ARGV[5] result          msgpack of what the step returned
-- Returns 1, or 0 when the claim is no longer ours (fenced, nothing written):
-- a run whose lease was lost must not leave a result that the run which
-- replaced it would read as its own.  The result is a field of the job's hash
-- ("step:<name>"), so it lives and goes with the record (retention, purge).
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
if not claim_guard(jk, token) then
  return 0
end
redis.call('HSET', jk, 'step:' .. ARGV[4], ARGV[5])
return 1

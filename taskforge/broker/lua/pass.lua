-- pass: give a claimed job back unrun because another live worker serves its task and this one does not,
-- without using an attempt, due again after a short delay that doubles with each pass of the job.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] token           the claim token
-- ARGV[4] delay_ms        the delay of a job's first pass
-- ARGV[5] cap_ms          the longest delay
-- Returns the delay in ms, or -1 when the claim is no longer ours (fenced).
-- Out of line for the delay, the job leaves the head of the queue to the jobs
-- this worker can run, and this worker does not claim it again at once.
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
local ours, f = claim_guard(jk, token, 'group', 'passes', 'lane')
if not ours then
  return -1
end
need_zsets(SCHEDULED)
local passes = tonumber(f[4]) or 0
if passes ~= passes or passes < 0 or passes > 30 then
  passes = 30
end
local delay = math.floor(math.min(tonumber(ARGV[5]), tonumber(ARGV[4]) * 2 ^ passes))
local due = now_ms() + delay
redis.call('HINCRBY', jk, 'attempts', -1)  -- first: a junk count fails here, before any write
leave_running(id, jk, f[3], f[5])
redis.call('HSET', jk, 'state', 'scheduled', 'token', '', 'scheduled_at', due, 'passes', passes + 1)
redis.call('ZADD', SCHEDULED, due, id)
wake(1)
return delay

-- fail: a run failed; schedule the next attempt or move the job to the dead-letter set.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] token           the claim token
-- ARGV[4] error
-- ARGV[5] traceback
-- ARGV[6] retry_delay_ms  (-1: no retry, dead now)
-- ARGV[7] dead_retention_ms
-- ARGV[8] failure         why, as a FailureKind value (the record's failure field)
-- ARGV[9] error_type      the class path of the error ("builtins.ValueError")
-- ARGV[10] retention_count (0: none; else at most that many finished records kept, trim_finished)
-- Returns 0 (claim not ours: fenced), 1 (retrying), 2 (dead).
-- outcome_token: the token whose report this was, read back after a lost reply.
-- A run whose child process died under it (failure 'crashed') uses a loss, not
-- an attempt (lose_run): once the losses are spent the job ends dead as
-- WorkerLost, whatever attempts it has left.
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
local ours, f = claim_guard(jk, token, 'attempts', 'max_attempts', 'group', 'lane')
if not ours then
  return 0
end
local now = now_ms()
local delay = tonumber(ARGV[6])
local attempts = tonumber(f[3]) or 0
local max_attempts = tonumber(f[4] or DEFAULT_MAX_ATTEMPTS) or 1  -- absent: the default; junk: no retry
local again = delay >= 0 and attempts < max_attempts
local buried = false
if ARGV[8] == 'crashed' then
  local losses, spent, most = lose_run(jk, attempts)
  again = delay >= 0 and not spent
  if spent then
    bury(id, jk, now, 'worker_lost', 'WorkerLost: ' .. losses .. ' runs lost their worker, over max_worker_losses=' ..
      most .. ' (the last: ' .. ARGV[4] .. ')', ARGV[5], tonumber(ARGV[7]), 'taskforge.errors.WorkerLost')
    buried = true
  end
end
if again then
  local due = now + delay
  need_zsets(SCHEDULED)
  leave_running(id, jk, f[5], f[6])
  redis.call('HSET', jk, 'state', 'retrying', 'token', '', 'failure', ARGV[8], 'error', ARGV[4],
    'error_type', ARGV[9], 'traceback', ARGV[5], 'scheduled_at', due, 'outcome_token', token)
  redis.call('ZADD', SCHEDULED, due, id)
  wake(1)
  count_outcome('failed', now)  -- after the damage checks: a refused call counts nothing
  return 1
end
if not buried then
  bury(id, jk, now, ARGV[8], ARGV[4], ARGV[5], tonumber(ARGV[7]), ARGV[9])
end
redis.call('HSET', jk, 'outcome_token', token)
count_outcome('failed', now)
trim_finished(tonumber(ARGV[10]), 2)
return 2

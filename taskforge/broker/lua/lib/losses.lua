-- Worker losses and interrupted runs: the runs that use no attempt.

-- A run whose worker was lost under it (its whole worker's lease expired, or
-- the child process running it died) uses a loss, not an attempt: the attempt
-- counted at its claim is refunded and `losses` counts the run.  Returns the
-- losses so far, whether they are over the job's `max_worker_losses` (absent:
-- 2), when the job ends dead (WorkerLost) instead of looping, and that budget.
-- Junk in either field reads as its default: a loss is never refused.
local function lose_run(jk, attempts)
  local f = redis.call('HMGET', jk, 'max_worker_losses', 'losses')
  local most = tonumber(f[1]) or 2
  local losses = (tonumber(f[2]) or 0) + 1
  redis.call('HSET', jk, 'attempts', math.max(0, attempts - 1), 'losses', losses)
  return losses, losses > most, most
end

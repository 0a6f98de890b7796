-- reclaim: jobs whose lease expired (their worker died) go back in line.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] limit
-- ARGV[3] dead_retention_ms
-- ARGV[4] retention_ms
-- Returns {reclaimed ids..., '|', buried ids..., '|', dropped count}.
-- A lost worker is not the job's failure: the run uses a loss, not an attempt
-- (lose_run), so a job that kills its worker every time ends dead (WorkerLost)
-- once its max_worker_losses are spent instead of looping.
-- A job claimed in a batch that its worker never said it started (marked
-- `unstarted` by the claim, cleared by settle.lua) goes back with that
-- attempt refunded: nothing ran, as when a live worker gives it back.
-- A job someone aborted while it ran ends cancelled here (in neither list):
-- its worker died before it could stop it, and running it again would only
-- have it killed at its first lease renewal.
local limit, dead_ttl, ttl = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_ms()
local expired = redis.call('ZRANGEBYSCORE', RUNNING, '-inf', now, 'LIMIT', 0, limit)
local back, buried, dropped = {}, {}, 0
if #expired > 0 then
  need_zsets(PENDING, SCHEDULED, DEAD)
  need_seq()
  need_limits()
end
for _, id in ipairs(expired) do
  local jk = job_key(id)
  if not is_job(jk) then
    redis.call('ZREM', RUNNING, id)
    dropped = dropped + 1
  else
    leave_running(id, jk)
    local f = redis.call('HMGET', jk, 'token', 'attempts', 'abort', 'unstarted')
    local raw = f[2]
    local attempts = tonumber(raw or 0)
    if f[3] then
      redis.call('HSET', jk, 'failure', 'aborted', 'error', 'Aborted: its worker was lost before it could stop it',
        'error_type', 'taskforge.errors.Aborted')
      finish(id, jk, 'cancelled', now, ttl)
    elseif not next_attempt(raw) then  -- junk: a count of runs that cannot be trusted
      bury(id, jk, now, 'corrupt', 'CorruptJob: its attempts field holds ' .. string.format('%q', tostring(raw)) ..
        ', not a count of runs; its lease expired and it was dead-lettered', '', dead_ttl,
        'taskforge.errors.CorruptJob')
      buried[#buried + 1] = id
    elseif f[4] == '1' then
      redis.call('HSET', jk, 'attempts', attempts - 1)
      redis.call('HDEL', jk, 'unstarted')
      restore_pending(id, jk)
      back[#back + 1] = id
    else
      local losses, spent, most = lose_run(jk, attempts)
      local lost = 'WorkerLost: the worker running attempt ' .. attempts ..
        ' stopped renewing its lease (it died or lost Redis)'
      if spent then
        bury(id, jk, now, 'worker_lost', lost .. '; ' .. losses .. ' runs lost their worker, over max_worker_losses=' ..
          most, '', dead_ttl, 'taskforge.errors.WorkerLost')
        buried[#buried + 1] = id
      else
        restore_pending(id, jk)
        redis.call('HSET', jk, 'failure', 'worker_lost', 'error', lost .. '; reclaimed (loss ' .. losses .. ' of ' ..
          most .. ' allowed, no attempt used)', 'error_type', 'taskforge.errors.WorkerLost')
        back[#back + 1] = id
      end
    end
  end
end
sweep_turns()
sweep_expiring(now, SWEEP_SLICE)
sweep_index(now - math.min(ttl, dead_ttl))
redis.pcall('ZREMRANGEBYSCORE', DEAD, '-inf', now - dead_ttl)  -- bury trims it too, but only when a job dies
if #back > 0 then
  wake(#back)
end
local out = back
out[#out + 1] = '|'
for _, id in ipairs(buried) do
  out[#out + 1] = id
end
out[#out + 1] = '|'
out[#out + 1] = dropped
return out

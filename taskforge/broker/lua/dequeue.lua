-- dequeue: promote due scheduled jobs, then claim up to `count` ready jobs.
-- ARGV[2] claim token (fresh per successful call; reused after an error)
-- ARGV[3] lease_ms   ARGV[4] promote limit   ARGV[5] count
-- Returns {dropped, wait_ms, then per claimed job 8 values:
--   id, task, payload, attempts, max_attempts, timeout, priority, inherit}
-- wait_ms: when nothing was claimed, ms until the next scheduled job is due
-- (-1: none), so an idle worker knows how long it may block.
-- Promotion is bounded per call so a million due jobs never stall Redis; the
-- claim is recorded in `running` in the same step as the pop, so a worker
-- dying between the two cannot lose the job.
local token, lease = ARGV[2], tonumber(ARGV[3])
local limit, count = tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
local dropped = 0
local function row(out, id, jk, attempts)
  local f = redis.call('HMGET', jk, 'task', 'payload', 'max_attempts', 'timeout', 'priority', 'inherit')
  local values = {id, f[1] or '', f[2] or '', attempts, f[3] or '', f[4] or '', f[5] or '', f[6] or ''}
  for _, v in ipairs(values) do
    out[#out + 1] = v
  end
end

-- The caller picks the token and reuses it until a dequeue answers. If this
-- token already holds claims, the previous call ran but its reply was lost
-- (a timeout, a dropped connection): hand the same jobs back instead of
-- claiming new ones, so no claimed job is orphaned until its lease expires.
local claim_key = PREFIX .. 'claim:' .. token
local previous = redis.call('LRANGE', claim_key, 0, -1)
if #previous > 0 then
  local out = {0, -1}
  for _, id in ipairs(previous) do
    local jk = job_key(id)
    if redis.call('HGET', jk, 'token') == token and redis.call('HGET', jk, 'state') == 'running' then
      row(out, id, jk, redis.call('HGET', jk, 'attempts'))
    end
  end
  if #out > 2 then
    return out
  end
end

dropped = promote_due(now, limit)

local out = {0, -1}
local claimed = 0
while claimed < count do
  local popped = redis.call('ZPOPMIN', PENDING, 1)
  if #popped == 0 then
    break
  end
  local id = popped[1]
  local jk = job_key(id)
  if is_job(jk) and redis.call('HGET', jk, 'state') == 'pending' then
    local attempts = redis.call('HINCRBY', jk, 'attempts', 1)
    redis.call('HSET', jk, 'state', 'running', 'started_at', now, 'token', token)
    redis.call('ZADD', RUNNING, now + lease, id)
    redis.call('RPUSH', claim_key, id)
    row(out, id, jk, attempts)
    claimed = claimed + 1
  else
    -- An id whose record expired or was deleted by hand: it can never run.
    dropped = dropped + 1
  end
end
out[1] = dropped
if claimed > 0 then
  redis.call('PEXPIRE', claim_key, lease)
else
  local nxt = redis.call('ZRANGE', SCHEDULED, 0, 0, 'WITHSCORES')
  if #nxt > 0 then
    out[2] = math.max(0, tonumber(nxt[2]) - now)
  end
end
return out

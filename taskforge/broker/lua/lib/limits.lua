-- Limits: a task's rate and concurrency, task-wide and per key: whether one
-- more job may start, the slot and rate-window place a start takes, and the
-- slot an end gives back.

-- Every way out of `running` passes here, so a concurrency slot is released
-- by success, failure, timeout, crash reclaim and abort alike.  `group` and
-- `lane` are the job's fields when the caller already read them (false:
-- none), else nil.  A lane held back by a limit the ending job counted
-- against gets its turn back at once: for a per-key limit, the key's lanes
-- of every band; for the task's own, one lane that limit held.
local function release_slot(id, jk, group, lane)
  if group == nil then
    local f = redis.call('HMGET', jk, 'group', 'lane')
    group, lane = f[1], f[2]
  end
  if group and group ~= '' and redis.call('SREM', PREFIX .. 'active:' .. group, id) == 1 then
    if redis.call('ZCARD', group_pending(group)) > 0 then
      wake(1)
    end
    local freed = redis.call('ZPOPMIN', PREFIX .. 'held_task:' .. group, 1)[1]
    if freed and unhold(freed) then
      wake(1)
    end
  end
  if not lane or lane == '' then
    return
  end
  local _, task, rest = lane_parts(lane)
  if task and redis.call('SREM', PREFIX .. 'key_active:' .. rest, id) == 1 then
    local held = redis.call('HMGET', HELD_HEAD, '0:' .. rest, '1:' .. rest, '2:' .. rest, '3:' .. rest)
    for band = 0, 3 do
      if held[band + 1] and unhold(band .. ':' .. rest) then
        wake(1)
      end
    end
  end
end

-- limits hash (and key_limits, per key): task -> "rate:period_ms:concurrency"
-- (0 = none), written by enqueue.
local function limit_spec(hash, task)
  local raw = redis.call('HGET', hash, task) or ''
  local rate, period, conc = string.match(raw, '^(%d+):(%d+):(%d+)$')
  return {rate = tonumber(rate) or 0, period = tonumber(period) or 1000, concurrency = tonumber(conc) or 0}
end

-- May one more job start under `spec`, whose running jobs are the set `ak`
-- and whose recent starts the zset `rk`, besides `extra` this very claim has
-- picked and not counted yet?  If not, also how many ms until it may (-1:
-- unknown, e.g. waiting for a running one to end, which wakes workers).
local function limit_allows(spec, ak, rk, now, extra)
  extra = extra or 0
  if spec.concurrency > 0 then
    local active = redis.call('SMEMBERS', ak)
    if #active + extra >= spec.concurrency then
      -- Self-healing: forget members no longer running (a record deleted by hand).
      for _, id in ipairs(active) do
        if redis.call('HGET', job_key(id), 'state') ~= 'running' then
          redis.call('SREM', ak, id)
        end
      end
      if redis.call('SCARD', ak) + extra >= spec.concurrency then
        return false, -1
      end
    end
  end
  if spec.rate > 0 then
    redis.call('ZREMRANGEBYSCORE', rk, '-inf', now - spec.period)
    if redis.call('ZCARD', rk) + extra >= spec.rate then
      local oldest = redis.call('ZRANGE', rk, 0, 0, 'WITHSCORES')
      return false, math.max(1, tonumber(oldest[2]) + spec.period - now)
    end
  end
  return true, -1
end

local function group_allows(group, now)
  return limit_allows(limit_spec(LIMITS, group), PREFIX .. 'active:' .. group, PREFIX .. 'rate:' .. group, now)
end

-- May the head of a limited lane of `task` start now (the task's own limits,
-- with `started` jobs of the task this claim picked already, then its per-key
-- ones, counted under `rest`, the lane without its band)?  Returns ok, the ms
-- until it may (-1: unknown), the task's per-key spec (for the claim to count
-- the start), and whether the task's own limit said no.
local function lane_allows(rest, task, now, started)
  local spec = limit_spec(KEY_LIMITS, task)
  local ok, wait = limit_allows(limit_spec(LIMITS, task), PREFIX .. 'active:' .. task, PREFIX .. 'rate:' .. task,
    now, started)
  if not ok then
    return false, wait, spec, true
  end
  ok, wait = limit_allows(spec, PREFIX .. 'key_active:' .. rest, PREFIX .. 'key_rate:' .. rest, now)
  return ok, wait, spec, false
end

-- A start counted against a limit (for each claimed job): a concurrency slot, and a
-- place in the rate window, which expires with the window.  The window's member is
-- the job and its claim token: each claim is a start of its own, even when the
-- attempt number repeats (a run lost with its worker refunds its attempt).
local function count_start(spec, ak, rk, id, token, now)
  if spec.concurrency > 0 then
    redis.call('SADD', ak, id)
  end
  if spec.rate > 0 then
    redis.call('ZADD', rk, now, id .. ':' .. token)
    redis.call('PEXPIRE', rk, spec.period)
  end
end

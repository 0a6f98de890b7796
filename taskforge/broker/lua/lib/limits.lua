-- Limits: a task's rate and concurrency, task-wide and per key: whether one
-- more job may start, the slot and rate-window place a start takes, and the
-- slot an end gives back.

-- limits hash (and key_limits, per key): task -> "rate:period_ms:concurrency"
-- (0 = none), written by enqueue; a task naming shared limits (app.limit)
-- has each one after it, "|name=rate:period_ms:concurrency", and its spec
-- lists them as `named` ({name, spec} each).
local function limit_spec(hash, task)
  local raw = redis.call('HGET', hash, task) or ''
  local rate, period, conc, rest = string.match(raw, '^(%d+):(%d+):(%d+)(.*)$')
  local named = {}
  for name, r, p, c in string.gmatch(rest or '', '|([^|=]+)=(%d+):(%d+):(%d+)') do
    named[#named + 1] = {name, {rate = tonumber(r), period = tonumber(p), concurrency = tonumber(c)}}
  end
  return {rate = tonumber(rate) or 0, period = tonumber(period) or 1000, concurrency = tonumber(conc) or 0,
    named = named}
end

-- A shared limit's running jobs and recent starts: keyed by its name within
-- the queue (its tasks are all in this queue, so they share this slot).
local function named_keys(name)
  return PREFIX .. 'named_active:' .. name, PREFIX .. 'named_rate:' .. name
end

-- A job of `group` ends: its slot in each shared limit its task names is
-- freed, and a worker woken, since a job of another task naming that limit
-- may be waiting for it (which task is not known here; a spurious wake only
-- costs an empty claim).
local function release_named(id, group)
  for _, limit in ipairs(limit_spec(LIMITS, group).named) do
    local ak = named_keys(limit[1])
    if redis.call('SREM', ak, id) == 1 then
      wake(1)
    end
  end
end

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
  if group and group ~= '' then
    if redis.call('SREM', PREFIX .. 'active:' .. group, id) == 1 then
      if redis.call('ZCARD', group_pending(group)) > 0 then
        wake(1)
      end
      local freed = redis.call('ZPOPMIN', PREFIX .. 'held_task:' .. group, 1)[1]
      if freed and unhold(freed) then
        wake(1)
      end
    end
    release_named(id, group)
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

-- May one more job start under every shared limit `spec` names, besides the
-- starts this claim picked and not counted yet (`started`: limit name ->
-- count; nil: none)?  As limit_allows.
local function named_allow(spec, now, started)
  for _, limit in ipairs(spec.named) do
    local ak, rk = named_keys(limit[1])
    local ok, wait = limit_allows(limit[2], ak, rk, now, started and started['|' .. limit[1]] or 0)
    if not ok then
      return false, wait
    end
  end
  return true, -1
end

-- The starts of one more job counted in `started` under each shared limit `spec` names.
local function named_picked(spec, started)
  for _, limit in ipairs(spec.named) do
    started['|' .. limit[1]] = (started['|' .. limit[1]] or 0) + 1
  end
end

local function group_allows(group, now)
  local spec = limit_spec(LIMITS, group)
  local ok, wait = limit_allows(spec, PREFIX .. 'active:' .. group, PREFIX .. 'rate:' .. group, now)
  if ok then
    return named_allow(spec, now, nil)
  end
  return ok, wait
end

-- May the head of a limited lane of `task` start now (the task's own limits,
-- with `started[task]` jobs of the task this claim picked already, then its per-key
-- ones, counted under `rest`, the lane without its band)?  The shared limits
-- it names count `started` too; an allowed head is counted there under each
-- of them, since the claim takes it.  Returns ok, the ms
-- until it may (-1: unknown), the task's per-key spec (for the claim to count
-- the start), and whether the task's own limit said no.
local function lane_allows(rest, task, now, started)
  local spec = limit_spec(KEY_LIMITS, task)
  local own = limit_spec(LIMITS, task)
  local ok, wait = limit_allows(own, PREFIX .. 'active:' .. task, PREFIX .. 'rate:' .. task, now, started[task] or 0)
  if ok then
    ok, wait = named_allow(own, now, started)
  end
  if not ok then
    return false, wait, spec, true
  end
  named_picked(own, started)
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

-- A start of a job of limited task `group`: counted against the task's own
-- limits and each shared limit it names.
local function count_group_start(group, id, token, now)
  local spec = limit_spec(LIMITS, group)
  count_start(spec, PREFIX .. 'active:' .. group, PREFIX .. 'rate:' .. group, id, token, now)
  for _, limit in ipairs(spec.named) do
    local ak, rk = named_keys(limit[1])
    count_start(limit[2], ak, rk, id, token, now)
  end
end

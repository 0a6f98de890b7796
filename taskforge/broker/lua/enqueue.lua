-- enqueue: store new jobs, ready or scheduled, all or none.
-- ARGV[2] max_size (0 = unbounded)   ARGV[3] number of jobs n
-- then n groups of 13:
--   id, task, payload, priority, max_attempts, timeout_ms,
--   due_ms     ('' = none; an absolute time chosen by the producer)
--   delay_ms   (relative, resolved against the server clock here)
--   inherit    ('1': sent by name; the worker's task definition supplies
--               max_attempts and timeout)
--   limits     ('' or "rate:period_ms:concurrency": the job waits in its
--               task's own pending set, see _lib.lua)
--   unique     ('' or the lock key: while a job holding it is unfinished,
--               the existing job is returned instead of a new one)
--   lock_ttl_ms (the TTL of the lock or tick key, so a crash never leaves one forever)
--   tick       ('' or a periodic tick key: SET NX, so each tick of a
--               periodic task is enqueued once however many workers try)
-- Returns {'OK', id or existing id or '' (tick already enqueued) per job},
-- or {'FULL', size}.
-- The max_size check and the inserts run in one script, so concurrent
-- producers can never overshoot the bound between a check and a write.
local FIELDS = 13
local max_size = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
if max_size > 0 then
  local size = unfinished_count()
  if size + n > max_size then
    return {'FULL', size}
  end
end
local now = now_ms()
local out = {'OK'}
local woken = 0

local function unfinished(id)
  local state = redis.call('HGET', job_key(id), 'state')
  return state and state ~= 'succeeded' and state ~= 'dead' and state ~= 'cancelled'
end

local function store(base, id, jk)
  local due = 0
  if ARGV[base + 6] ~= '' then
    due = tonumber(ARGV[base + 6])
  elseif tonumber(ARGV[base + 7]) > 0 then
    due = now + tonumber(ARGV[base + 7])
  end
  redis.call('HSET', jk, 'id', id, 'task', ARGV[base + 1], 'payload', ARGV[base + 2],
    'priority', ARGV[base + 3], 'max_attempts', ARGV[base + 4], 'timeout', ARGV[base + 5],
    'attempts', 0, 'created_at', now)
  if ARGV[base + 8] == '1' then
    redis.call('HSET', jk, 'inherit', '1')
  end
  if ARGV[base + 9] ~= '' then
    redis.call('HSET', LIMITS, ARGV[base + 1], ARGV[base + 9])
  end
  -- Limits registered by a worker apply to jobs sent by name too.
  if redis.call('HEXISTS', LIMITS, ARGV[base + 1]) == 1 then
    redis.call('HSET', jk, 'group', ARGV[base + 1])
  end
  if ARGV[base + 10] ~= '' then
    redis.call('SET', ARGV[base + 10], id, 'PX', tonumber(ARGV[base + 11]))
    redis.call('HSET', jk, 'unique', ARGV[base + 10])
  end
  if due > now then
    redis.call('HSET', jk, 'state', 'scheduled', 'scheduled_at', due)
    redis.call('ZADD', SCHEDULED, due, id)
  else
    make_pending(id, jk)
  end
  woken = woken + 1
end

for i = 0, n - 1 do
  local base = 4 + i * FIELDS
  local id = ARGV[base]
  local jk = job_key(id)
  local lock, tick = ARGV[base + 10], ARGV[base + 12]
  local holder = lock ~= '' and redis.call('GET', lock)
  if redis.call('EXISTS', jk) == 1 then
    -- A client that lost the reply re-sends this script with the same ids:
    -- jobs already stored are left alone, so a retry never resets a job that
    -- has since run, or revives one that finished.
    out[#out + 1] = id
  elseif holder and holder ~= id and unfinished(holder) then
    out[#out + 1] = holder
  elseif tick ~= '' and not redis.call('SET', tick, id, 'NX', 'PX', tonumber(ARGV[base + 11])) then
    out[#out + 1] = ''
  else
    store(base, id, jk)
    out[#out + 1] = id
  end
end
wake(woken)
return out

-- enqueue: store new jobs, ready or scheduled, all or none.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] max_size        (0 = unbounded)
-- ARGV[3..] jobs          pairs: a JSON array of the job's plain fields, and its msgpack
--                         payload (kept apart: Lua cannot read msgpack, and JSON cannot carry bytes)
-- The JSON array: [id, task, priority, max_attempts, timeout_ms,
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
--               periodic task is enqueued once however many workers try)]
-- Returns {'OK', id or existing id or '' (tick already enqueued) per job},
-- or {'FULL', size}.
-- The max_size check and the inserts run in one script, so concurrent
-- producers can never overshoot the bound between a check and a write.
local max_size = tonumber(ARGV[2])
local n = (#ARGV - 2) / 2
-- Every fixed key this call may write is read first, so a damaged queue
-- fails here, before anything is stored (see need_zsets in _lib.lua).
local limited = {}
for _, group in ipairs(redis.call('HKEYS', LIMITS)) do
  limited[group] = true
end
redis.call('ZCARD', PENDING)
redis.call('ZCARD', SCHEDULED)
need_seq()
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

-- Inline rather than through make_pending: this is the hottest script, and
-- every redis.call saved here is saved once per job enqueued.

local function store(f, payload, id, jk)
  local task = f[2]
  local due = 0
  if f[6] ~= '' then
    due = tonumber(f[6])
  elseif tonumber(f[7]) > 0 then
    due = now + tonumber(f[7])
  end
  local fields = {'id', id, 'task', task, 'payload', payload, 'priority', f[3], 'max_attempts', f[4],
    'timeout', f[5], 'attempts', 0, 'created_at', now, 'token', ''}
  local function add(name, value)
    fields[#fields + 1] = name
    fields[#fields + 1] = value
  end
  if f[8] == '1' then
    add('inherit', '1')
  end
  if f[9] ~= '' then
    redis.call('HSET', LIMITS, task, f[9])
    limited[task] = true
  end
  -- Limits registered by a worker apply to jobs sent by name too.
  if limited[task] then
    add('group', task)
  end
  if f[10] ~= '' then
    redis.call('SET', f[10], id, 'PX', tonumber(f[11]))
    add('unique', f[10])
  end
  if due > now then
    add('state', 'scheduled')
    add('scheduled_at', due)
    redis.call('HSET', jk, unpack(fields))
    redis.call('ZADD', SCHEDULED, due, id)
  else
    local seq = next_seq(1)
    add('state', 'pending')
    add('seq', seq)
    redis.call('HSET', jk, unpack(fields))
    redis.call('ZADD', limited[task] and group_pending(task) or PENDING, pending_score(f[3], seq), id)
  end
  woken = woken + 1
end

for i = 0, n - 1 do
  local f = cjson.decode(ARGV[3 + 2 * i])
  local payload = ARGV[4 + 2 * i]
  local id = f[1]
  local jk = job_key(id)
  local lock, tick = f[10], f[12]
  local holder = lock ~= '' and redis.call('GET', lock)
  if redis.call('EXISTS', jk) == 1 then
    -- A client that lost the reply re-sends this script with the same ids:
    -- jobs already stored are left alone, so a retry never resets a job that
    -- has since run, or revives one that finished.
    out[#out + 1] = id
  elseif holder and holder ~= id and unfinished(holder) then
    out[#out + 1] = holder
  elseif tick ~= '' and not redis.call('SET', tick, id, 'NX', 'PX', tonumber(f[11])) then
    out[#out + 1] = ''
  else
    store(f, payload, id, jk)
    out[#out + 1] = id
  end
end
wake(woken)
return out

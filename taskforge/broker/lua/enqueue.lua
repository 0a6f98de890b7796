-- enqueue: store new jobs, ready or scheduled, all or none.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] max_size        (0 = unbounded)
-- ARGV[3] resend          '1': a re-send after an error (or ids the caller chose): an id
--                         already stored is left alone; or one step of a big
--                         batch, sent in slices (`Slices` below)
-- ARGV[4..] jobs          pairs: a JSON array of the job's plain fields, and its msgpack
--                         payload (kept apart: Lua cannot read msgpack, and JSON cannot carry bytes)
-- The JSON array is declared in broker/record.py (ENQUEUE), which gives this
-- script each slot's position as NEW_<NAME>; NEW_STORED lists the slots kept
-- in the record as they are (task, priority, max_attempts, timeout, inherit,
-- workflow), each unless '' (as a default priority or max_attempts comes).
-- The script reads the others:
--   id         the job's id (its key; not stored)
--   task, priority, inherit  (also stored) its task's pending set and limits,
--              its place in line; inherit '1': sent by name, the worker's
--              task definition supplies max_attempts and timeout, and limits
--              a worker registered apply
--   due        ('' = none; an absolute time chosen by the producer)
--   delay      (relative, resolved against the server clock here)
--   limits     ('' or "rate:period_ms:concurrency", and "|name=..." per shared limit: the job waits in its
--               task's own pending set, see lib/keys.lua)
--   unique     ('' or the lock key: while a job holding it is unfinished,
--               the existing job is returned instead of a new one)
--   lock_ttl   (the TTL of the lock or tick key, so a crash never leaves one forever)
--   tick       ('' or a periodic tick key: SET NX, so each tick of a
--               periodic task is enqueued once however many workers try)
--   fields     ('' or an object of plain fields stored as they are: the
--               retry filters with_options chose, keep_ms of an expiring
--               job, the headers producer hooks set)
--   expires_at ('' or an absolute time in ms: not started by then, the job
--               ends cancelled, "expired", unrun)
--   expires_in (ms after now, on the server clock; 0 = none)
--   key        (also stored) the job's key ('' = none): the job waits in its
--              key's lane (lib/lanes.lua), a lane of its task's own when the task
--              has limits
--   key_limits ('' or "rate:period_ms:concurrency" per key, published for the claim)
--   debounce   ('' or "delay_ms:max_wait_ms", see `debounced` below)
-- A workflow step (workflow, stored) leaves a report in the queue's outbox
-- when it ends.
-- Returns {'OK', id or existing id or '' (tick already enqueued) per job},
-- or {'FULL', size}.
-- The max_size check and the inserts run in one script, so concurrent
-- producers can never overshoot the bound between a check and a write.
--
-- Damage (a fixed key of the wrong type, a junk or exhausted seq) must stop
-- the call before anything is stored: Redis does not undo the writes a
-- script made before a command failed.  The plain call (one job, no lock, no
-- tick, not a re-send) gets that from its write order: the seq and the
-- queue's set come first, and a failure there leaves only a spent sequence
-- number; the client names the damage (broker/damage.py).  Other calls
-- read every fixed key they may write first.
--
-- Slices: a call too big to run within the time budget (broker/batches.py)
-- comes as several.  'stage:<batch>:<i>:<ttl_ms>' keeps ARGV[4..] as they
-- are in the batch's slice i (a list no worker reads, expiring after
-- ttl_ms: an abandoned batch goes by itself) and answers {'STAGED'}.
-- 'commit:<batch>:<slices>:<total>:<step>' steps first keep the staged slices
-- from expiring, <step> (KEEP_STEP) per call ({'KEPT', n}; {'GONE'}: one expired), then
-- check max_size for the whole batch ({'FULL', size}) and reserve room for
-- the total (`RESERVED`, counted by every max_size check until the slice is
-- stored): from then on the batch is committed, and each step stores its
-- next slice as a call of its own would ({'SLICE', i, id per job}; {'DONE'}
-- when none is left).  Whoever sends the next step finishes it: the
-- producer, or, once it stopped for stale_ms, a worker's BatchSweep
-- ('finish:<batch>:<stale_ms>:0:<step>'), which also drops a batch never committed
-- ({'DROPPING'} then {'DROPPED'}: a refused or broken batch is dropped so at once).  A slice whose answer
-- differs from its own ids keeps it in the batch's record, for a producer
-- that lost the reply.
local max_size = tonumber(ARGV[2])
local mode = ARGV[3]
local RESERVED = PREFIX .. 'reserved'
local BATCHES = PREFIX .. 'batches'
local src, off = ARGV, 3
local batch, slice, marker = nil, nil, nil
if string.sub(mode, 1, 6) == 'stage:' then
  local name, i, ttl = string.match(mode, '^stage:([%w]+):(%d+):(%d+)$')
  local key = PREFIX .. 'staged:' .. name .. ':' .. i
  redis.call('DEL', key)
  for first = 4, #ARGV, 1000 do
    redis.call('RPUSH', key, unpack(ARGV, first, math.min(first + 999, #ARGV)))
  end
  redis.call('PEXPIRE', key, tonumber(ttl))
  return {'STAGED'}
elseif string.sub(mode, 1, 7) == 'commit:' or string.sub(mode, 1, 7) == 'finish:' then
  local given, total, step
  batch, given, total, step = string.match(mode, '^%a+:([%w]+):(%d+):(%d+):(%d+)$')
  local KEEP_STEP = tonumber(step)  -- staged slices a step keeps from expiring, or drops
  marker = PREFIX .. 'batch:' .. batch
  local row = redis.call('HMGET', marker, 'next', 'slices', 'kept')
  local at, slices, kept = tonumber(row[1]), tonumber(row[2]) or tonumber(given), tonumber(row[3]) or 0
  total = tonumber(total)
  local function staged(i)
    return PREFIX .. 'staged:' .. batch .. ':' .. i
  end
  if string.sub(mode, 1, 7) == 'finish:' then  -- `given` is stale_ms here
    local moved = tonumber(redis.call('ZSCORE', BATCHES, batch))
    if not row[2] then
      redis.call('ZREM', BATCHES, batch)  -- finished or dropped meanwhile
      return {'DONE'}
    elseif moved and now_ms() - moved < tonumber(given) then
      return {'FRESH'}  -- its producer sent a step within stale_ms
    elseif not at then
      -- never committed: unlink the slices kept from expiring, KEEP_STEP per call
      local low = math.max(0, kept - KEEP_STEP)
      for i = low, kept - 1 do
        redis.call('UNLINK', staged(i))
      end
      if low > 0 then
        redis.call('HSET', marker, 'kept', low)
        return {'DROPPING'}
      end
      redis.call('DEL', marker)
      redis.call('ZREM', BATCHES, batch)
      return {'DROPPED'}
    end
  elseif not at then
    -- Before the commit: keep the slices from expiring, KEEP_STEP per call,
    -- each checked; a batch abandoned now is dropped by a worker's sweep.
    redis.call('ZADD', BATCHES, now_ms(), batch)
    local upto = math.min(slices, kept + KEEP_STEP)
    for i = kept, upto - 1 do
      if redis.call('EXISTS', staged(i)) == 0 then
        redis.call('HSET', marker, 'slices', slices, 'kept', i)
        redis.call('ZADD', BATCHES, 0, batch)  -- to drop
        return {'GONE'}
      end
      redis.call('PERSIST', staged(i))
    end
    redis.call('HSET', marker, 'slices', slices, 'kept', upto)
    if upto < slices then
      return {'KEPT', upto}
    end
    if max_size > 0 then
      local size = unfinished_count() + (tonumber(redis.call('GET', RESERVED)) or 0)
      if size + total > max_size then
        redis.call('ZADD', BATCHES, 0, batch)  -- to drop
        return {'FULL', size}
      end
    end
    redis.call('HSET', marker, 'next', 0)
    redis.call('INCRBY', RESERVED, total)
    at = 0
  end
  if at >= slices then
    return {'DONE'}
  end
  slice = PREFIX .. 'staged:' .. batch .. ':' .. at
  src, off = redis.call('LRANGE', slice, 0, -1), 0
  if string.sub(mode, 1, 7) == 'commit:' then
    redis.call('ZADD', BATCHES, now_ms(), batch)  -- its producer is alive: no sweep yet
  end
  max_size = 0  -- checked for the whole batch above
  slice = {key = slice, at = at, last = at == slices - 1}
end
local resend = mode == '1' or batch ~= nil
local n = (#src - off) / 2
local jobs = {}
local plain = n == 1 and not resend
for i = 1, n do
  local f = cjson.decode(src[off - 1 + 2 * i])
  jobs[i] = f
  plain = plain and f[NEW_UNIQUE] == '' and f[NEW_TICK] == '' and f[NEW_DEBOUNCE] == ''
end
local function debounce_lock(f)
  return PREFIX .. 'debounce:' .. f[NEW_TASK] .. ':' .. f[NEW_KEY]
end
if not plain then
  redis.call('ZCARD', PENDING)
  redis.call('ZCARD', SCHEDULED)
  need_seq()
  need_limits()
  for i = 1, n do
    if jobs[i][NEW_DEBOUNCE] ~= '' then
      redis.call('GET', debounce_lock(jobs[i]))
    end
  end
end
if max_size > 0 then
  local size = unfinished_count() + (tonumber(redis.call('GET', RESERVED)) or 0)
  if size + n > max_size then
    return {'FULL', size}
  end
end
local now = now_ms()
local out = {'OK'}
local woken = 0
local lane_count = {}  -- band -> jobs put in lanes
local book = {fronts = {}}  -- the turns of open lanes' jobs, written back once
local entries = {}  -- the new jobs' search index entries, written in one ZADD

-- Sequence numbers for this call's ready jobs: one INCRBY for the whole call
-- (a delay_many of 10,000 jobs saves 9,999 commands), handed out in order;
-- those left over (scheduled jobs, ids already stored) go back at the end.
local seq_last, seq_next = nil, nil
local function take_seq()
  if not seq_next then
    seq_last = next_seq(n)
    seq_next = seq_last - n + 1
  end
  local seq = seq_next
  seq_next = seq_next + 1
  return seq
end

local function unfinished(id)
  local state = redis.call('HGET', job_key(id), 'state')
  return state and state ~= 'succeeded' and state ~= 'dead' and state ~= 'cancelled'
end

-- Does this job wait in its task's own pending set?  Its own limits say so
-- (and are published for the claim); a job sent by name asks the limits a
-- worker registered for its task.  A plain job's producer knows its task
-- has none: no lookup.
local function limited(f)
  if f[NEW_LIMITS] ~= '' then
    redis.call('HSET', LIMITS, f[NEW_TASK], f[NEW_LIMITS])
    return true
  end
  return f[NEW_INHERIT] == '1' and redis.call('HEXISTS', LIMITS, f[NEW_TASK]) == 1
end

-- Inline rather than through the library's transitions: this is the hottest script, and
-- every redis.call saved here is saved once per job enqueued.  The set is
-- written before the job's hash: the first write that can fail comes first.
local function store(f, payload, id, jk)
  local due = 0
  if f[NEW_DUE] ~= '' then
    due = tonumber(f[NEW_DUE])
  elseif tonumber(f[NEW_DELAY]) > 0 then
    due = now + tonumber(f[NEW_DELAY])
  end
  local fields = {'payload', payload, 'created_at', now}  -- attempts 0, token '': absent
  local function add(name, value)
    fields[#fields + 1] = name
    fields[#fields + 1] = value
  end
  for i = 1, #NEW_STORED, 2 do
    local value = f[NEW_STORED[i]]
    if value ~= '' then
      add(NEW_STORED[i + 1], value)
    end
  end
  if type(f[NEW_FIELDS]) == 'table' then
    for name, value in pairs(f[NEW_FIELDS]) do
      add(name, value)
    end
  end
  if f[NEW_EXPIRES_AT] ~= '' then
    add('expires', f[NEW_EXPIRES_AT])
  elseif tonumber(f[NEW_EXPIRES_IN]) > 0 then
    add('expires', now + tonumber(f[NEW_EXPIRES_IN]))
  end
  local grouped = limited(f)
  if grouped then
    add('group', f[NEW_TASK])
  end
  local lane = nil
  if f[NEW_KEY] ~= '' then
    if f[NEW_KEY_LIMITS] ~= '' then
      redis.call('HSET', KEY_LIMITS, f[NEW_TASK], f[NEW_KEY_LIMITS])
    end
    local band = math.floor(pending_score(f[NEW_PRIORITY], 0) / BAND)
    if grouped or f[NEW_KEY_LIMITS] ~= '' then
      lane = band .. ':' .. #f[NEW_TASK] .. ':' .. f[NEW_TASK] .. f[NEW_KEY]
    else
      lane = band .. ':0:' .. f[NEW_KEY]
    end
    add('lane', lane)
  end
  if due > now then
    redis.call('ZADD', SCHEDULED, due, id)
    add('state', 'scheduled')
    add('scheduled_at', due)
  elseif lane and is_open_lane(lane) then
    local band = math.floor(pending_score(f[NEW_PRIORITY], 0) / BAND)
    local score = take_turn(book, lane, band)
    if score - band * BAND >= BAND - 1000000 then
      error('taskforge: ' .. SEQ .. ' is exhausted')
    end
    redis.call('ZADD', PENDING, score, id)
    add('state', 'pending')
    add('seq', score - band * BAND)
  else
    local seq = take_seq()
    if seq >= BAND - 1000000 then
      error('taskforge: ' .. SEQ .. ' is exhausted')
    end
    local score = pending_score(f[NEW_PRIORITY], seq)
    if lane then
      lane_add(lane, id, score)
      local band = math.floor(score / BAND)
      lane_count[band] = (lane_count[band] or 0) + 1
    else
      redis.call('ZADD', grouped and group_pending(f[NEW_TASK]) or PENDING, score, id)
    end
    add('state', 'pending')
    add('seq', seq)
  end
  if f[NEW_UNIQUE] ~= '' then
    redis.call('SET', f[NEW_UNIQUE], id, 'PX', tonumber(f[NEW_LOCK_TTL]))
    add('unique', f[NEW_UNIQUE])
  end
  redis.call('HSET', jk, unpack(fields))
  for _, member in ipairs(index_entries(id, now, f[NEW_TASK], f[NEW_KEY])) do
    entries[#entries + 1] = member
  end
  woken = woken + 1
end

-- A debounced task's call ("delay_ms:max_wait_ms"; max 0: no cap): while the
-- burst's job of this task and key has not started (scheduled, or pending
-- once due), it takes this call's arguments and starts delay_ms from now,
-- but never later than max_wait_ms after the burst's first call; its id is
-- the answer.  Otherwise this call starts a new burst: a job due in
-- delay_ms, named by the burst's lock (TTL refreshed by every call).
local function debounced(f, payload, id, jk)
  local wait, cap = string.match(f[NEW_DEBOUNCE], '^(%d+):(%d+)$')
  wait, cap = tonumber(wait), tonumber(cap)
  local lock = debounce_lock(f)
  local ttl = wait + cap + 60000
  local holder = redis.call('GET', lock)
  if holder then
    local hk = job_key(holder)
    local h = redis.pcall('HMGET', hk, 'state', 'debounce_first')  -- a damaged record starts a new burst
    local first = type(h) == 'table' and not h.err and tonumber(h[2])
    if first and (h[1] == 'scheduled' or h[1] == 'pending') then
      local due = now + wait
      if cap > 0 then
        due = math.min(due, first + cap)
      end
      if h[1] == 'pending' then
        remove_pending(holder, hk)
      end
      redis.call('ZADD', SCHEDULED, due, holder)
      redis.call('HSET', hk, 'payload', payload, 'state', 'scheduled', 'scheduled_at', due)
      redis.call('PEXPIRE', lock, ttl)
      return holder
    end
  end
  store(f, payload, id, jk)
  redis.call('HSET', jk, 'debounce_first', now)
  redis.call('SET', lock, id, 'PX', ttl)
  return id
end

for i = 1, n do
  local f = jobs[i]
  local payload = src[off + 2 * i]
  local id = f[NEW_ID]
  local jk = job_key(id)
  local lock, tick = f[NEW_UNIQUE], f[NEW_TICK]
  local holder = lock ~= '' and redis.call('GET', lock)
  if not plain and redis.call('EXISTS', jk) == 1 then
    -- A client that lost the reply re-sends this script with the same ids:
    -- jobs already stored are left alone, so a retry never resets a job that
    -- has since run, or revives one that finished.  (Fresh ids are random,
    -- so only a re-send can meet one already stored: the plain call, never
    -- a re-send, skips the look.)
    out[#out + 1] = id
  elseif holder and holder ~= id and unfinished(holder) then
    out[#out + 1] = holder
  elseif tick ~= '' and not redis.call('SET', tick, id, 'NX', 'PX', tonumber(f[NEW_LOCK_TTL])) then
    out[#out + 1] = ''
  elseif f[NEW_DEBOUNCE] ~= '' then
    out[#out + 1] = debounced(f, payload, id, jk)
  else
    store(f, payload, id, jk)
    out[#out + 1] = id
  end
end
if seq_next and seq_next <= seq_last then
  redis.call('DECRBY', SEQ, seq_last - seq_next + 1)
end
count_lane_jobs(lane_count)
write_turns(book)
index_add(entries)
wake(woken)
if slice then
  local differs = false
  for i = 1, n do
    differs = differs or out[i + 1] ~= jobs[i][NEW_ID]
  end
  if differs then
    redis.call('HSET', marker, 'out:' .. slice.at, cjson.encode({unpack(out, 2)}))
  end
  redis.call('DEL', slice.key)
  redis.call('HSET', marker, 'next', slice.at + 1)
  if (tonumber(redis.call('DECRBY', RESERVED, n)) or 0) <= 0 then
    redis.call('DEL', RESERVED)
  end
  if slice.last then
    redis.call('ZREM', BATCHES, batch)
    redis.call('PEXPIRE', marker, 600000)  -- for a producer that lost the last reply
  end
  out[1] = slice.at
  table.insert(out, 1, 'SLICE')
end
return out

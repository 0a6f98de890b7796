-- Shared helpers: scripts.py puts the definitions each script uses in front
-- of it (Redis scripts cannot `require`, and Redis runs a script's whole text
-- on every call, so unused helpers would cost each call).  ARGV[1] is the
-- queue's key prefix "taskforge:{<queue>}:", and every key a script touches is
-- built from it, so all carry the queue's hash tag and every script stays in
-- one Redis Cluster slot.  KEYS[1] is the queue's pending key, declared so
-- that cluster clients route the call to the node owning that slot; declaring
-- one key instead of six also keeps each call small (client-side argument
-- encoding is a real share of a round trip).
local PREFIX = ARGV[1]
local PENDING = PREFIX .. 'pending'
local SCHEDULED = PREFIX .. 'scheduled'
local RUNNING = PREFIX .. 'running'
local DEAD = PREFIX .. 'dead'
local SEQ = PREFIX .. 'seq'
local WAKE = PREFIX .. 'wake'
local unpack = unpack or table.unpack  -- Lua 5.1 in Redis; newer Lua in some emulators

-- Pending score = priority band + enqueue sequence: ZPOPMIN then yields the
-- highest priority first and, within one priority, the oldest first.  (Equal
-- scores would pop by member, i.e. by random job id, not FIFO.)  2^50 per band
-- keeps every score an exact double (< 2^53).
local BAND = 1125899906842624
-- A bounded number of wake tokens: enough for every idle worker to be woken,
-- few enough that a burst of enqueues leaves at most twice this many spurious wakeups.
local WAKE_CAP = 64

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function job_key(id)
  return PREFIX .. 'job:' .. id
end

-- Junk in a job's priority field (nan, 1e400, 'x': written by something
-- else) means normal priority: a nan score would make ZADD fail half-way.
local function pending_score(priority, seq)
  local p = tonumber(priority) or 1
  if p ~= p or p < 0 or p > 3 or p ~= math.floor(p) then p = 1 end
  return (3 - p) * BAND + tonumber(seq)
end

-- Queue-level damage (a fixed key of the wrong type, a junk or exhausted
-- seq) must stop a script before its first write: Redis does not undo the
-- writes a script made before a command failed, so a later failure would
-- leave a job half-moved.  These checks run only on paths that are not the
-- hot path, or only once a cheap read said something is off; the client
-- names the damaged key (broker/damage.py).
local function need_zsets(...)
  for _, key in ipairs({...}) do
    local kind = redis.call('TYPE', key)['ok']
    if kind ~= 'zset' and kind ~= 'none' then
      error('taskforge: ' .. key .. ' is a ' .. kind .. ', not a zset')
    end
  end
end

local function need_seq()
  local n = tonumber(redis.call('GET', SEQ) or 0)
  if not n or n ~= n or n >= BAND - 1000000 then
    error('taskforge: ' .. SEQ .. ' is not a usable sequence number')
  end
end

-- The next `n` enqueue sequence numbers (returns the last).  Past BAND a
-- score would spill into the next priority band: the queue is exhausted.
local function next_seq(n)
  local last = redis.call('INCRBY', SEQ, n or 1)
  if last >= BAND then
    error('taskforge: ' .. SEQ .. ' is exhausted')
  end
  return last
end

-- Wake tokens are only a hint (idle workers also wake on a timeout), so a
-- damaged wake list never fails a transition half-way; workers report it.
-- LPUSH answers the length, so the list is trimmed only once it passes twice
-- the cap: one command per enqueue, not a length check first.
local function wake(count)
  local tokens = {}
  for i = 1, math.min(count, WAKE_CAP) do
    tokens[i] = '1'
  end
  local have = redis.pcall('LPUSH', WAKE, unpack(tokens))
  if type(have) == 'number' and have > 2 * WAKE_CAP then
    redis.pcall('LTRIM', WAKE, 0, WAKE_CAP - 1)
  end
end

-- Jobs of a task with a rate or concurrency limit wait in a pending set of
-- their own ("group", the task name), so a limited task that cannot start
-- never blocks the other tasks of its queue: the claim looks past it.
local LIMITS = PREFIX .. 'limits'

-- A paused queue (app.pause) starts no job: every claim and peek reads this
-- key first.  A plain key with no TTL, so a pause outlives every worker.
local PAUSED = PREFIX .. 'paused'

local function group_pending(group)
  return PREFIX .. 'pending:' .. group
end

-- A group that no limit names (a job hash edited by hand) would park the
-- job in a set no claim ever looks at: such a job waits in the main set.
local function pending_key(jk)
  local group = redis.call('HGET', jk, 'group')
  if group and group ~= '' and redis.call('HEXISTS', LIMITS, group) == 1 then
    return group_pending(group)
  end
  return PENDING
end

-- pending_key reads the limits hash (HEXISTS) half-way through a transition
-- for a limited task's job; scripts that may get there read it up front.
local function need_limits()
  redis.call('HEXISTS', LIMITS, '')
end

-- Put a job at the back of its priority (a new sequence number).
local function make_pending(id, jk)
  local seq = next_seq(1)
  redis.call('HSET', jk, 'state', 'pending', 'seq', seq, 'token', '')
  redis.call('ZADD', pending_key(jk), pending_score(redis.call('HGET', jk, 'priority'), seq), id)
end

-- A dead job back at the back of its line with a fresh set of attempts
-- (retry_dead, and replan_steps reviving a resumed workflow's dead step): its
-- record stops expiring, and a leftover done list, which would make every
-- result() wait return at once, goes.  The caller has taken it off DEAD.
local function revive_dead(id, jk)
  redis.call('PERSIST', jk)
  redis.call('HSET', jk, 'attempts', 0)
  redis.call('HDEL', jk, 'finished_at', 'result', 'waiting', 'abort')
  redis.call('UNLINK', PREFIX .. 'done:' .. id)
  make_pending(id, jk)
end

-- Put a job back where it stood in line (its original sequence number), for
-- jobs that were taken but not run to the end through no fault of their own.
-- A junk seq field takes a new place at the back.
local function restore_pending(id, jk)
  local seq = tonumber(redis.call('HGET', jk, 'seq'))
  if not seq or seq ~= seq or seq < 0 or seq >= BAND or seq ~= math.floor(seq) then
    seq = next_seq(1)
  end
  redis.call('HSET', jk, 'state', 'pending', 'seq', seq, 'token', '')
  redis.call('ZADD', pending_key(jk), pending_score(redis.call('HGET', jk, 'priority'), seq), id)
end

-- Every way out of `running` passes here, so a concurrency slot is released
-- by success, failure, timeout, crash reclaim and abort alike.  `group` is the
-- job's group field when the caller already read it (false: none), else nil.
local function release_slot(id, jk, group)
  if group == nil then
    group = redis.call('HGET', jk, 'group')
  end
  if group and group ~= '' then
    if redis.call('SREM', PREFIX .. 'active:' .. group, id) == 1
        and redis.call('ZCARD', group_pending(group)) > 0 then
      wake(1)
    end
  end
end

local function leave_running(id, jk, group)
  redis.call('ZREM', RUNNING, id)
  release_slot(id, jk, group)
end

-- A unique job's lock goes when the job finishes (or dies); its TTL covers
-- crashes.  Only a key of this queue's unique locks is ever touched, whatever
-- the job's field says (pcall: a damaged lock must not strand the job).
local function release_unique(id, lock)
  if lock and string.sub(lock, 1, #PREFIX + 7) == PREFIX .. 'unique:' and redis.pcall('GET', lock) == id then
    redis.call('DEL', lock)
  end
end

-- Wake whoever waits in JobHandle.result(); only when somebody does, so a
-- finished job costs no extra key otherwise.
local function notify_done(id, ttl)
  local dk = PREFIX .. 'done:' .. id
  if type(redis.pcall('RPUSH', dk, '1')) ~= 'number' then
    redis.call('DEL', dk)  -- damaged by something else: the waiter needs an answer more
    redis.call('RPUSH', dk, '1')
  end
  redis.call('PEXPIRE', dk, ttl)
end

-- The end of a job: its final state (plus `extra` field/value pairs) in one
-- HSET.  `meta` is {unique, waiting, workflow} when the caller already read those
-- fields, else nil: every redis.call costs a few microseconds inside Redis,
-- so the hot path reads each job's fields once.
local function finish(id, jk, state, now, ttl, extra, meta)
  meta = meta or redis.call('HMGET', jk, 'unique', 'waiting', 'workflow')
  release_unique(id, meta[1])
  local fields = {'state', state, 'finished_at', now, 'token', ''}
  for _, v in ipairs(extra or {}) do
    fields[#fields + 1] = v
  end
  redis.call('HSET', jk, unpack(fields))
  redis.call('PEXPIRE', jk, ttl)
  if meta[2] then
    notify_done(id, ttl)
  end
  if meta[3] then
    -- A workflow step: leave its report in this queue's outbox, in this slot and
    -- in this very step, for the worker (or the reconciler) to deliver to the
    -- workflow's own slot; it is removed only once delivered.
    redis.call('HSET', PREFIX .. 'outbox', id, meta[3])
  end
end

-- The fencing rule (README.md): a report about a claim counts only while the
-- job is running under that claim's token.  A lease that expired and was
-- reclaimed gave the job a new token, so a late worker is refused here and
-- never overwrites the attempt that replaced it.  Reads the token, the state
-- and the `...` fields in one HMGET (f[1], f[2], then the extras), for the
-- caller's use; pcall: a key that is not a hash is no claim of anybody's.
-- Returns whether the claim is still ours, and the fields (nil on a damaged key).
local function claim_guard(jk, token, ...)
  local f = redis.pcall('HMGET', jk, 'token', 'state', ...)
  if type(f) ~= 'table' or f.err then
    return false, nil
  end
  return f[1] == token and f[2] == 'running', f
end

-- Cancel a job that has not started (pending, scheduled or retrying): it will
-- never run.  Shared by cancel and abort (`extra`: field/value pairs to write
-- with the final state).  Returns 1, or 0 when the job is running or finished
-- (too late to cancel it this way).
local function cancel_unstarted(id, jk, state, ttl, extra)
  if state == 'pending' then
    redis.call('ZREM', pending_key(jk), id)
  elseif state == 'scheduled' or state == 'retrying' then
    redis.call('ZREM', SCHEDULED, id)
  else
    return 0
  end
  finish(id, jk, 'cancelled', now_ms(), ttl, extra)
  return 1
end

-- Dead-letter a job: `kind` is its failure field (a FailureKind value), `err`
-- the same reason in words, `error_type` the class path of that error.
local function bury(id, jk, now, kind, err, traceback, dead_ttl, error_type)
  local pk = pending_key(jk)
  need_zsets(pk, SCHEDULED, RUNNING, DEAD)
  redis.call('ZREM', pk, id)
  redis.call('ZREM', SCHEDULED, id)
  leave_running(id, jk)
  redis.call('ZADD', DEAD, now, id)
  redis.call('ZREMRANGEBYSCORE', DEAD, '-inf', now - dead_ttl)
  finish(id, jk, 'dead', now, dead_ttl, {'failure', kind, 'error', err, 'error_type', error_type,
    'traceback', traceback or ''})
end

-- Per-minute outcome counts of a queue, for the dashboard's last-hour figures:
-- one small hash per minute, kept two hours.  Counted here, inside the script
-- that records the outcome, because a client-side command would cost every
-- job a round trip.  pcall: a damaged counter must never stop an outcome
-- from being recorded.
local function count_outcome(field, now)
  local key = PREFIX .. 'stats:' .. math.floor(now / 60000)
  if redis.pcall('HINCRBY', key, field, 1) == 1 then
    redis.pcall('PEXPIRE', key, 7200000)
  end
end

local function is_job(jk)
  return redis.call('TYPE', jk)['ok'] == 'hash'
end

-- limits hash: task -> "rate:period_ms:concurrency" (0 = none), written by enqueue.
local function limit_spec(group)
  local raw = redis.call('HGET', LIMITS, group) or ''
  local rate, period, conc = string.match(raw, '^(%d+):(%d+):(%d+)$')
  return {rate = tonumber(rate) or 0, period = tonumber(period) or 1000, concurrency = tonumber(conc) or 0}
end

-- May a job of `group` start now? If not, also how many ms until it may
-- (-1: unknown, e.g. waiting for a running one to end, which wakes workers).
local function group_allows(group, now)
  local spec = limit_spec(group)
  if spec.concurrency > 0 then
    local ak = PREFIX .. 'active:' .. group
    local active = redis.call('SMEMBERS', ak)
    if #active >= spec.concurrency then
      -- Self-healing: forget members no longer running (a record deleted by hand).
      for _, id in ipairs(active) do
        if redis.call('HGET', job_key(id), 'state') ~= 'running' then
          redis.call('SREM', ak, id)
        end
      end
      if redis.call('SCARD', ak) >= spec.concurrency then
        return false, -1
      end
    end
  end
  if spec.rate > 0 then
    local rk = PREFIX .. 'rate:' .. group
    redis.call('ZREMRANGEBYSCORE', rk, '-inf', now - spec.period)
    if redis.call('ZCARD', rk) >= spec.rate then
      local oldest = redis.call('ZRANGE', rk, 0, 0, 'WITHSCORES')
      return false, math.max(1, tonumber(oldest[2]) + spec.period - now)
    end
  end
  return true, -1
end

-- The pending set whose head is the best job allowed to start now: the main
-- set, or a limited task's set whose limits allow it.  `groups` is HKEYS of
-- the limits hash.  Returns key, group (nil for the main set), the ms until a
-- blocked group may start (-1), and the head's score.
local function best_ready(now, groups)
  local best_key, best_group, best_score = nil, nil, nil
  local head = redis.call('ZRANGE', PENDING, 0, 0, 'WITHSCORES')
  if #head > 0 then
    best_key, best_score = PENDING, tonumber(head[2])
  end
  local blocked_wait = -1
  for _, group in ipairs(groups) do
    local key = group_pending(group)
    local ghead = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #ghead > 0 and (best_score == nil or tonumber(ghead[2]) < best_score) then
      local ok, wait = group_allows(group, now)
      if ok then
        best_key, best_group, best_score = key, group, tonumber(ghead[2])
      elseif wait >= 0 and (blocked_wait < 0 or wait < blocked_wait) then
        blocked_wait = wait
      end
    end
  end
  return best_key, best_group, blocked_wait, best_score
end

-- Jobs not finished yet (pending in any set, scheduled, retrying, running): what max_size bounds.
local function unfinished_count()
  local size = redis.call('ZCARD', PENDING) + redis.call('ZCARD', SCHEDULED) + redis.call('ZCARD', RUNNING)
  for _, group in ipairs(redis.call('HKEYS', LIMITS)) do
    size = size + redis.call('ZCARD', group_pending(group))
  end
  return size
end

-- What a claim reads of a job, in one HMGET: the fields claim_ready itself
-- needs (f[1] to f[CLAIM_OWN]), then CLAIMED, the fields it hands to the
-- worker as they are (declared in broker/record.py: ClaimRow).
local CLAIM_OWN = 5
local CLAIM_FIELDS = {'state', 'attempts', 'token', 'seq', 'expires', unpack(CLAIMED)}

-- Whether a job's `expires` field (ms; nil for none) has passed.  Junk counts
-- as no expiry: a job is never dropped on a field nobody can read.
local function is_expired(raw, now)
  local at = raw and tonumber(raw)
  return at ~= nil and at == at and at <= now
end

-- A job not started by its `expires` time ends cancelled, "expired", and never
-- runs; its record is kept for the `keep_ms` the producer stored beside it.
local function end_expired(id, jk, now)
  local keep = tonumber(redis.call('HGET', jk, 'keep_ms'))
  if not keep or keep ~= keep or keep <= 0 then
    keep = 86400000
  end
  finish(id, jk, 'cancelled', now, keep, {'failure', 'expired', 'error', 'expired',
    'error_type', 'taskforge.errors.Expired'})
  count_outcome('expired', now)
end

-- Move scheduled and retrying jobs whose time has come to pending, at most
-- `limit` per call so a million due jobs never stall Redis. Returns how many
-- ids had no job record left and were dropped.
local function promote_due(now, limit)
  local dropped = 0
  local due = redis.call('ZRANGEBYSCORE', SCHEDULED, '-inf', now, 'LIMIT', 0, limit)
  if #due > 0 then
    need_zsets(PENDING)
    need_seq()
  end
  for _, id in ipairs(due) do
    redis.call('ZREM', SCHEDULED, id)
    local jk = job_key(id)
    local expires = redis.pcall('HGET', jk, 'expires')
    if type(expires) == 'string' and is_expired(expires, now) then
      end_expired(id, jk, now)
    elseif redis.call('TYPE', jk)['ok'] == 'hash' then
      make_pending(id, jk)
    else
      dropped = dropped + 1
    end
  end
  return dropped
end


-- One row of a claim's reply (broker/record.py: ClaimRow): id, attempts,
-- damage, then the CLAIMED fields.  damage is '' or 'state <value>' /
-- 'attempts <value>': that field holds junk, and the client dead-letters
-- the job instead of running it.
local function claim_row(out, id, f, attempts)
  local damage = ''
  if f[1] ~= 'running' and f[1] ~= 'pending' then
    damage = 'state ' .. tostring(f[1] or '(none)')
  elseif not attempts then
    damage = 'attempts ' .. tostring(f[2])
  end
  local n = #out
  out[n + 1], out[n + 2], out[n + 3] = id, attempts or f[2], damage
  for i = CLAIM_OWN + 1, #CLAIM_FIELDS do
    out[n + 3 + i - CLAIM_OWN] = f[i] or ''
  end
end

-- A job's fields, or nil when its key is missing or not a hash (deleted or
-- damaged by hand): such an id can never run.  A hash without a state field
-- is a job all the same (TYPE is asked only then).
local function read_claim_fields(jk)
  local f = redis.pcall('HMGET', jk, unpack(CLAIM_FIELDS))
  if type(f) ~= 'table' or f.err or (not f[1] and not is_job(jk)) then
    return nil
  end
  return f
end

-- The next attempt number, or nil when the field holds junk: a count of runs
-- that cannot be trusted could loop a job forever, so such a job is dead-lettered.
local function next_attempt(raw)
  local n = tonumber(raw or 0)
  if not n or n ~= n or n < 0 or n > 1e9 or n ~= math.floor(n) then
    return nil
  end
  return n + 1
end

-- The claim of the jobs popped together from `key` (rows: {id, jk, attempts,
-- score}; score: the pending score, to put it back): their leases first, in
-- one ZADD, so a damaged running set fails the claim before anything is
-- written; then each job's state, and for a limited task its concurrency
-- slot and rate window.  `attempts` nil: the field holds junk, left as
-- evidence (a reclaim dead-letters such a job too).
local function take(rows, token, now, lease, group, key)
  local leases = {}
  for i, row in ipairs(rows) do
    leases[2 * i - 1], leases[2 * i] = now + lease, row[1]
  end
  local ok = redis.pcall('ZADD', RUNNING, unpack(leases))
  if type(ok) ~= 'number' then
    for _, row in ipairs(rows) do
      redis.call('ZADD', key, row[4], row[1])
    end
    error('taskforge: ' .. RUNNING .. ' cannot hold claims')
  end
  for _, row in ipairs(rows) do
    local id, jk, attempts = row[1], row[2], row[3]
    if attempts then
      redis.call('HSET', jk, 'state', 'running', 'started_at', now, 'token', token, 'attempts', attempts)
    else
      redis.call('HSET', jk, 'state', 'running', 'started_at', now, 'token', token)
    end
    if group then
      redis.call('SADD', PREFIX .. 'active:' .. group, id)
      local spec = limit_spec(group)
      if spec.rate > 0 then
        local rk = PREFIX .. 'rate:' .. group
        redis.call('ZADD', rk, now, id .. ':' .. attempts)
        redis.call('PEXPIRE', rk, spec.period)
      end
    end
  end
end

-- How many expired jobs one claim ends at most before it answers (it may answer
-- empty-handed, with wait 0: the client calls again at once).
local EXPIRE_LIMIT = 100

-- How many of the latest claims a retried dequeue looks through for its token.
local RECOVER_SCAN = 500

-- The previous call with this token ran but its reply was lost: its jobs, or
-- {}.  Asked only when the client re-sends a dequeue after an error (the
-- retry flag), so the plain claim keeps no list of what it claimed: the jobs
-- of a lost reply are running under this token, among the running members
-- with the latest lease deadlines (claimed since, or renewed).  Bounded: a
-- job beyond the scan is reclaimed when its lease expires, never lost.
local function reclaimed_rows(token)
  local found = {}
  for _, id in ipairs(redis.call('ZREVRANGE', RUNNING, 0, RECOVER_SCAN - 1)) do
    local f = read_claim_fields(job_key(id))
    if f and f[1] == 'running' and f[3] == token then
      local score = pending_score(redis.call('HGET', job_key(id), 'priority'), tonumber(f[4]) or 0)
      found[#found + 1] = {score, id, f}
    end
  end
  -- In the order the lost call claimed them: best place in line first.
  table.sort(found, function(a, b)
    return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2])
  end)
  local out = {0, -1}
  for _, row in ipairs(found) do
    claim_row(out, row[2], row[3], next_attempt(row[3][2]) and row[3][2])
  end
  return out
end

-- Claim up to `count` ready jobs for `token`, promoting due ones first.
-- Returns {dropped, wait_ms, then a claim_row per claimed job} (the layout
-- dequeue.lua documents). Shared by dequeue and by succeed,
-- which can claim the next job in the same call.  This is the hottest code in
-- the project: each redis.call here costs a few microseconds per job, so the
-- plain claim pays only for what the client says it needs (`opts`):
--   retry    the previous call with this token may have claimed jobs whose reply was lost
--   promote  move due scheduled jobs first (the client asks at a bounded interval)
--   limited  the queue has limited tasks: look at their pending sets too
--   unpaused this very call read the pause already (the second look below)
-- A lean call that finds nothing ready looks again with promote and limited
-- before it answers "idle", so no job ever waits on a stale client flag for
-- longer than the client's refresh interval while other jobs are ready.
local function claim_ready(token, lease, limit, count, now, opts)
  now = now or now_ms()
  if opts.retry then
    local previous = reclaimed_rows(token)
    if #previous > 2 then
      return previous
    end
  end
  if not opts.unpaused and redis.call('EXISTS', PAUSED) == 1 then
    return {0, -1}  -- idle until resume, which wakes the waiters
  end
  local groups = opts.limited and redis.call('HKEYS', LIMITS) or {}
  local dropped = opts.promote and promote_due(now, limit) or 0
  local out = {0, -1}
  local ids = {}
  local blocked_wait = -1
  local expired = 0
  while #ids < count and expired < EXPIRE_LIMIT do
    -- Without limited tasks the whole batch comes off the main set in one
    -- ZPOPMIN (every redis.call costs a few microseconds); with them, one job
    -- at a time from whichever set holds the best job a limit allows.
    local key, group, want = PENDING, nil, count - #ids
    if #groups > 0 then
      key, group, blocked_wait = best_ready(now, groups)
      if not key then
        break
      end
      want = 1
    end
    local popped = redis.call('ZPOPMIN', key, want)
    if #popped == 0 then
      break
    end
    local rows, fields = {}, {}
    for p = 1, #popped, 2 do
      local id = popped[p]
      local jk = job_key(id)
      local f = read_claim_fields(jk)
      local state = f and f[1]
      if f and f[5] and state == 'pending' and is_expired(f[5], now) then
        end_expired(id, jk, now)
        expired = expired + 1
      elseif f and state ~= 'running' and state ~= 'succeeded' and state ~= 'dead' and state ~= 'cancelled' then
        -- Pending, or a record with junk in its state or attempts: claimed
        -- alike, and the client dead-letters a damaged one with the reason
        -- (claim_row says which); a lease keeps it safe meanwhile.
        rows[#rows + 1] = {id, jk, next_attempt(f[2]), popped[p + 1]}
        fields[#rows] = f
      else
        -- An id whose record expired or was deleted by hand: it can never run.
        dropped = dropped + 1
      end
    end
    if #rows > 0 then
      take(rows, token, now, lease, group, key)
      for i, row in ipairs(rows) do
        claim_row(out, row[1], fields[i], row[3])
        ids[#ids + 1] = row[1]
      end
    end
    if #popped < 2 * want then
      break  -- the set is empty now
    end
  end
  if #ids == 0 and expired >= EXPIRE_LIMIT then
    out[1] = dropped
    out[2] = 0
    return out
  end
  if #ids == 0 and not (opts.promote and opts.limited) then
    out = claim_ready(token, lease, limit, count, now, {promote = true, limited = true, unpaused = true})
    out[1] = out[1] + dropped
    return out
  end
  out[1] = dropped
  if #ids == 0 then
    local nxt = redis.call('ZRANGE', SCHEDULED, 0, 0, 'WITHSCORES')
    if #nxt > 0 then
      out[2] = math.max(0, tonumber(nxt[2]) - now)
    end
    if blocked_wait >= 0 and (out[2] < 0 or blocked_wait < out[2]) then
      out[2] = blocked_wait
    end
  end
  return out
end

-- The claim options of a dequeue or chained claim from its ARGV flags ('1' = on).
local function claim_opts(promote, limited, retry)
  return {promote = promote == '1', limited = limited == '1', retry = retry == '1'}
end

-- Workflows.  A workflow's keys share the hash tag {wf:<id>} (ARGV[1] is its
-- prefix), so its scripts are single-slot wherever its steps' queues live.
-- The record holds, besides state and times: spec:<i> (msgpack, read only
-- by the client), queue:<i>, next:<i> (the steps that wait for step i),
-- input:<i> (the steps whose results step i receives), result:<i>.  Sets:
-- open (steps not yet reported), waiting (steps not yet free to go: some
-- step before them has not succeeded), wait:<j> (the steps j still waits
-- for).  The steps in flight (maybe stored, not reported) are open minus
-- waiting: one SDIFF when a workflow ends, no bookkeeping per step.

-- Record fields hold long lists (a 10,000-member group); unpack has a limit.
local CHUNK = 1000

local function split(list)
  local out = {}
  for v in string.gmatch(list or '', '[^,]+') do
    out[#out + 1] = v
  end
  return out
end

local function in_chunks(command, key, values)
  for i = 1, #values, CHUNK do
    redis.call(command, key, unpack(values, i, math.min(i + CHUNK - 1, #values)))
  end
end

-- What the client needs to send step j: its index, its spec, then the result
-- of every step listed in its input field, in that order.
local function launch_entry(rk, j)
  local f = redis.call('HMGET', rk, 'spec:' .. j, 'input:' .. j)
  local entry = {j, f[1] or ''}
  local inputs = split(f[2])
  for i = 1, #inputs, CHUNK do
    local fields = {}
    for k = i, math.min(i + CHUNK - 1, #inputs) do
      fields[#fields + 1] = 'result:' .. inputs[k]
    end
    for _, v in ipairs(redis.call('HMGET', rk, unpack(fields))) do
      entry[#entry + 1] = v or ''
    end
  end
  return entry
end

-- A workflow that ended: its steps that may be stored and never reported
-- (to cancel), its on_failure step when it died, and 1: the client must settle
-- it once it did both (workflow_settle); nothing after that.
local function ending(rk, state)
  if redis.call('HGET', rk, 'settled') then
    return {}, {}, 0
  end
  local ready, cancel = {}, {}
  local k = redis.call('HGET', rk, 'on_failure')
  if state == 'dead' and k then
    -- Then the failed step's index, queue and error: an on_failure step built
    -- with .s() receives its summary (the client reads the rest in its record).
    local entry = launch_entry(rk, k)
    local failed = redis.call('HMGET', rk, 'failed_step', 'error')
    entry[#entry + 1] = failed[1] or ''
    entry[#entry + 1] = failed[1] and redis.call('HGET', rk, 'queue:' .. failed[1]) or ''
    entry[#entry + 1] = failed[2] or ''
    ready[1] = entry
  end
  for _, j in ipairs(redis.call('SDIFF', PREFIX .. 'open', PREFIX .. 'waiting')) do
    cancel[#cancel + 1] = j
    cancel[#cancel + 1] = redis.call('HGET', rk, 'queue:' .. j) or ''
  end
  return ready, cancel, 1
end

-- Move a running workflow to its final state, wake whoever waits on it, and
-- let its keys expire after the retention (an open workflow never expires).
local function end_workflow(rk, state, ttl, extra)
  local fields = {'state', state, 'finished_at', now_ms()}
  for _, v in ipairs(extra or {}) do
    fields[#fields + 1] = v
  end
  redis.call('HSET', rk, unpack(fields))
  local waits = {}
  for _, j in ipairs(redis.call('SMEMBERS', PREFIX .. 'open')) do
    waits[#waits + 1] = PREFIX .. 'wait:' .. j
  end
  if #waits > 0 then
    for i = 1, #waits, CHUNK do
      redis.call('DEL', unpack(waits, i, math.min(i + CHUNK - 1, #waits)))
    end
  end
  local done = PREFIX .. 'done'
  redis.call('RPUSH', done, '1')
  for _, key in ipairs({rk, PREFIX .. 'open', PREFIX .. 'waiting', done}) do
    redis.call('PEXPIRE', key, ttl)
  end
end

-- The end of a job: out of `running`, the final state and what goes with it
-- (unique lock, waiters, stream, workflow outbox, retention count), and the
-- ends before a run: a cancel of a job not started, and the dead-letter.

local function leave_running(id, jk, group, lane)
  redis.call('ZREM', RUNNING, id)
  release_slot(id, jk, group, lane)
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

-- retention_count: at most `keep` finished records in the queue (0: no
-- count).  EXPIRING holds one member per finished record, so while it holds
-- more than `keep`, those due to expire first go (with one retention, the
-- oldest), at most `most` per call: each end of a job takes away up to two,
-- so a count lowered comes down soon after, and no call deletes more than a
-- few records.  A record no longer finished (retried) only leaves EXPIRING;
-- a workflow step whose report is still in the outbox stays.
local function trim_finished(keep, most)
  local n = keep and keep > 0 and redis.pcall('ZCARD', EXPIRING)
  if type(n) ~= 'number' or n <= keep then
    return
  end
  local over = redis.pcall('ZRANGE', EXPIRING, 0, math.min(n - keep, most) - 1)
  if type(over) ~= 'table' or over.err then
    return
  end
  local gone, left = {}, {}
  for _, rest in ipairs(over) do
    local members, id = entries_named(rest)
    local state = id and redis.pcall('HGET', job_key(id), 'state')
    if state == 'succeeded' or state == 'dead' or state == 'cancelled' or state == false then
      if redis.call('HEXISTS', PREFIX .. 'outbox', id) == 0 then
        redis.pcall('ZREM', DEAD, id)
        redis.call('UNLINK', job_key(id), PREFIX .. 'done:' .. id, stream_key(id))
        for _, m in ipairs(members) do
          gone[#gone + 1] = m
        end
        left[#left + 1] = rest
      end
    else
      left[#left + 1] = rest  -- junk, or a record not finished now
    end
  end
  zrem_all(EXPIRING, left)
  zrem_all(INDEX, gone)
end

-- The end of a job: its final state (plus `extra` field/value pairs) in one
-- HSET, and one HDEL of what a finished record never needs: the claim token
-- (absent is nobody's claim), its place in line and the unstarted mark of a
-- batch's later job (each about 10 bytes in every record kept).  `meta` is {unique, waiting, workflow, stream_length, created_at,
-- task, key, dependents} when the caller already read those fields, else nil: every
-- redis.call costs a few microseconds inside Redis, so the hot path reads
-- each job's fields once.  A job that streamed gets its stream the record's
-- expiry; one that did not pays nothing for streams.  The record's EXPIRING
-- member says when its index entries go.
local function finish(id, jk, state, now, ttl, extra, meta)
  meta = meta or redis.call('HMGET', jk, 'unique', 'waiting', 'workflow', 'stream_length', 'created_at', 'task', 'key',
    'dependents')
  release_unique(id, meta[1])
  local fields = {'state', state, 'finished_at', now}
  for _, v in ipairs(extra or {}) do
    fields[#fields + 1] = v
  end
  redis.call('HSET', jk, unpack(fields))
  redis.call('HDEL', jk, 'token', 'seq', 'unstarted')
  redis.call('PEXPIRE', jk, ttl)
  index_expire(meta[5], meta[6], meta[7], id, now + ttl)
  if state ~= 'succeeded' then
    index_mark(jk, id, state == 'dead' and 'd' or 'c', true)
  end
  if meta[4] then
    redis.call('PEXPIRE', stream_key(id), ttl)
  end
  if meta[2] then
    notify_done(id, ttl)
  end
  if meta[3] then
    -- A workflow step: leave its report in this queue's outbox, in this slot and
    -- in this very step, for the worker (or the reconciler) to deliver to the
    -- workflow's own slot; it is removed only once delivered.
    redis.call('HSET', PREFIX .. 'outbox', id, meta[3])
  end
  if meta[8] then
    -- Jobs wait for this one (depends_on, depend.lua): its end waits in the depbox, in this
    -- step, until reported to each of them (dep_report.lua) and dropped.
    redis.pcall('HSET', PREFIX .. 'depbox', id, state)  -- damaged: the audit lists its dependents again
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

-- Cancel a job that has not started (pending, scheduled, retrying or deferred): it will
-- never run.  Shared by cancel and abort (`extra`: field/value pairs to write
-- with the final state).  Returns 1, or 0 when the job is running or finished
-- (too late to cancel it this way).
local function cancel_unstarted(id, jk, state, ttl, extra)
  if state == 'pending' then
    remove_pending(id, jk)
  elseif state == 'scheduled' or state == 'retrying' then
    redis.call('ZREM', SCHEDULED, id)
  elseif state == 'deferred' then
    redis.call('ZREM', PREFIX .. 'deferred', id)
    redis.call('DEL', PREFIX .. 'met:' .. id)
  else
    return 0
  end
  finish(id, jk, 'cancelled', now_ms(), ttl, extra)
  return 1
end

-- Dead-letter a job: `kind` is its failure field (a FailureKind value), `err`
-- the same reason in words, `error_type` the class path of that error.
local function bury(id, jk, now, kind, err, traceback, dead_ttl, error_type)
  need_zsets(pending_key(jk), SCHEDULED, RUNNING, DEAD)
  remove_pending(id, jk)
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

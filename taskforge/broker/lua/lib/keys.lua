-- The rooms of lua/lib/ hold the helpers the scripts share, one concern a
-- room.  scripts.py puts the definitions each script uses in front of it
-- (Redis scripts cannot `require`, and Redis runs a script's whole text on
-- every call, so unused helpers would cost each call), each after those it
-- uses: a room may use another's definitions, wherever they sit.  A room's
-- opening comment, up to its first blank line, goes into no script.
--
-- This room: the queue's fixed keys, the pending score and its sequence, and
-- the wake list.  ARGV[1] is the queue's key prefix "taskforge:{<queue>}:",
-- and every key a script touches is built from it, so all carry the queue's
-- hash tag and every script stays in one Redis Cluster slot.  KEYS[1] is the
-- queue's pending key, declared so that cluster clients route the call to
-- the node owning that slot; declaring one key instead of six also keeps each
-- call small (client-side argument encoding is a real share of a round trip).

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

-- A job's stream (current_job().stream): a Redis Stream beside its record,
-- under the same hash tag; it lives and goes with the record.
local function stream_key(id)
  return PREFIX .. 'stream:' .. id
end

-- Junk in a job's priority field (nan, 1e400, 'x': written by something
-- else) means normal priority: a nan score would make ZADD fail half-way.
local function pending_score(priority, seq)
  local p = tonumber(priority) or 1
  if p ~= p or p < 0 or p > 3 or p ~= math.floor(p) then p = 1 end
  return (3 - p) * BAND + tonumber(seq)
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

local function is_job(jk)
  return redis.call('TYPE', jk)['ok'] == 'hash'
end

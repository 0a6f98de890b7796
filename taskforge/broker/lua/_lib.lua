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

-- A keyed job's lane (its `lane` field) names one key's ready jobs of one
-- priority band: "<band>:0:<key>" (an open lane), or "<band>:<n>:<task><key>"
-- (n = the task's length in bytes) for a task with limits, whose jobs are
-- checked against them.  An open lane's jobs wait in PENDING at their
-- turns (KEY_TURNS, below).  A limited lane's jobs wait apart, and the
-- claim takes those lanes in turn: each lane with ready jobs has one
-- *head*, its oldest job, which waits in TURNS (scored like a pending job,
-- priority band + sequence: a lane is one place in line however many jobs
-- it holds), as the member "<#id>:<id><lane>"
-- (turn_member), so a claim knows the job and its lane without a read.  The
-- lane's other jobs wait in lane:<lane> (scored like pending).  LANE_SIZE
-- counts each lane's jobs, head included: an enqueue makes its job the head
-- when the count was 0, and a claim reads the counts of all the lanes it
-- takes in one HMGET, so it pops a lane only for a next head or a share of
-- the batch, and leaves no empty lane behind to look at later.  The next
-- head goes to the back of its band.  A head its task's limits stop waits in
-- HELD (scored by when to look again; HELD_HEAD: lane -> its member) instead
-- of TURNS.  A key with no jobs leaves nothing behind.
local TURNS = PREFIX .. 'turns'
local HELD = PREFIX .. 'held'
local HELD_HEAD = PREFIX .. 'held_head'
local LANE_SIZE = PREFIX .. 'lane_size'
local KEY_LIMITS = PREFIX .. 'key_limits'
-- How many jobs wait in lanes, per priority band (hash: band -> count), kept
-- as they come and go: what max_size and the queue's pending counts need,
-- without a look at every lane.  `counts`: band -> change.
local LANE_JOBS = PREFIX .. 'lane_jobs'
local function count_lane_jobs(counts)
  for band, n in pairs(counts) do
    if n ~= 0 then
      redis.call('HINCRBY', LANE_JOBS, band, n)
    end
  end
end

-- Keyed jobs of a task without limits (lanes "<band>:0:<key>") need no
-- lane and no head: they wait in PENDING itself, each at a *turn*, the
-- score's sequence part (start-time fair queueing).  A job without a key
-- takes the next sequence number, as ever; a key's job takes the turn after
-- its key's last waiting job or, for a key with none waiting, the turn at
-- the front of its band.  So one turn holds at most one job per key (equal
-- scores go by job id), a key's 100,000 jobs hold 100,000 turns one after
-- another, a new key's job waits behind at most one job per key, and the
-- claim of keyed jobs stays one ZPOPMIN.
-- KEY_TURNS: open lane -> the turn (a full score) of the last job the key
-- was given, one plain number.  A key with a job waiting has its entry at or
-- past the front of its band (its waiting jobs' turns are); an entry behind
-- the front is stale (none of its key's jobs waits) and counts as none, so
-- a claim or a cancel never has to touch the entries: the claim of keyed
-- jobs costs what a keyless claim does, however many keys there are.  Stale
-- entries go in the sweeps reclaim runs (each worker, every second or so:
-- at most SWEEP_COUNT entries looked at per sweep, from a cursor kept in
-- TURNS_AT), and all at once when a purge empties PENDING, so an idle key's
-- entry goes within seconds.  A claim moves SEQ up to the turns it took,
-- so no job sent later goes before a turn already served.  The entries only
-- place jobs in line: junk or a wrong type costs a job its turn, never the
-- job, so they go through pcall.
local KEY_TURNS = PREFIX .. 'key_turns'
local TURNS_AT = PREFIX .. 'key_turns_at'
local SWEEP_COUNT = 1000

local function is_open_lane(lane)
  local band = (string.byte(lane, 1) or 0) - 48
  return band >= 0 and band <= 3 and string.byte(lane, 2) == 58 and string.byte(lane, 3) == 48
    and string.byte(lane, 4) == 58
end

-- The lowest score waiting in band `band` of PENDING (nil: none).
local function band_head(band)
  local low = band * BAND
  local first = redis.pcall('ZRANGEBYSCORE', PENDING, low, '(' .. string.format('%d', low + BAND), 'LIMIT', 0, 1,
    'WITHSCORES')
  return type(first) == 'table' and first[2] and tonumber(first[2]) or nil
end

-- The turn (a full score) of a new job of open lane `lane` in band `band`:
-- the one after its key's last, or, with none of its key's jobs waiting,
-- the front of the band (with none waiting there, where the next job
-- without a key would stand).  `book` caches, per call, the entries read
-- (lane -> last turn, false: none) and the fronts (fronts: band -> score);
-- the caller writes the entries back once.
local function take_turn(book, lane, band)
  local last = book[lane]
  if last == nil then
    local raw = redis.pcall('HGET', KEY_TURNS, lane)
    last = type(raw) == 'string' and tonumber(raw) or false
    if last ~= last then
      last = false  -- nan: junk
    end
  end
  local front = book.fronts[band]
  if not front then
    front = band_head(band) or (band * BAND + (tonumber(redis.call('GET', SEQ)) or 0))
    book.fronts[band] = front
  end
  local turn = (last and last >= front) and last + 1 or front
  book[lane] = turn
  return turn
end

-- The entries a call gave turns to (take_turn's book) back into KEY_TURNS.
local function write_turns(book)
  local keep = {}
  for lane, turn in pairs(book) do
    if lane ~= 'fronts' and turn then
      keep[#keep + 1], keep[#keep + 2] = lane, turn
    end
  end
  for first = 1, #keep, 2000 do  -- unpack has a limit: a delay_many of 10,000 keys goes in slices
    redis.pcall('HSET', KEY_TURNS, unpack(keep, first, math.min(first + 1999, #keep)))
  end
end

-- Keyed jobs of open lanes were claimed, the highest turn among them `top`
-- (its sequence part): SEQ moves up to it.
local function seq_past(top)
  local seq = redis.pcall('GET', SEQ)
  if (seq == false or type(seq) == 'string') and top > (tonumber(seq or 0) or top) then
    redis.call('SET', SEQ, top)
  end
end

-- One step of the sweep of stale entries (see KEY_TURNS).
local function sweep_turns()
  local at = redis.pcall('GET', TURNS_AT)
  local step = redis.pcall('HSCAN', KEY_TURNS, type(at) == 'string' and at or '0', 'COUNT', SWEEP_COUNT)
  if type(step) ~= 'table' or step.err then
    return
  end
  local heads, stale = {}, {}
  local found = step[2]
  for i = 1, #found, 2 do
    local lane, last = found[i], tonumber(found[i + 1])
    local band = (string.byte(lane, 1) or 0) - 48
    if band >= 0 and band <= 3 then
      if heads[band] == nil then
        heads[band] = band_head(band) or false
      end
      if not last or not heads[band] or last < heads[band] then
        stale[#stale + 1] = lane
      end
    else
      stale[#stale + 1] = lane  -- not a lane's entry (written by hand)
    end
  end
  if #stale > 0 then
    redis.pcall('HDEL', KEY_TURNS, unpack(stale))
  end
  if step[1] ~= '0' then
    redis.pcall('SET', TURNS_AT, step[1])
  elseif at then
    redis.pcall('DEL', TURNS_AT)
  end
end

local function lane_key(lane)
  return PREFIX .. 'lane:' .. lane
end

-- A lane's band, its task (nil for a task without limits) and the lane
-- without its band (what its per-key limits are counted under).
-- Read with byte offsets, not patterns: the claim does this for every head.
local function lane_parts(lane)
  local band = (string.byte(lane, 1) or 0) - 48
  if band < 0 or band > 3 or string.byte(lane, 2) ~= 58 then
    return 2, nil, lane  -- not a lane name (edited by hand): normal priority, no limits
  end
  if string.byte(lane, 3) == 48 and string.byte(lane, 4) == 58 then
    return band, nil, nil  -- "<band>:0:<key>": no limits
  end
  local colon = string.find(lane, ':', 3, true)
  local n = colon and tonumber(string.sub(lane, 3, colon - 1))
  if not n then
    return band, nil, nil
  end
  return band, string.sub(lane, colon + 1, colon + n), string.sub(lane, 3)
end

local function turn_member(id, lane)
  return #id .. ':' .. id .. lane
end

local function member_parts(member)
  local colon = string.find(member, ':', 1, true)
  local n = colon and tonumber(string.sub(member, 1, colon - 1))
  if not n then
    return member, ''
  end
  return string.sub(member, colon + 1, colon + n), string.sub(member, colon + n + 1)
end

-- The set a pending job waits in, and its lane (nil for none).  A group that
-- no limit names (a job hash edited by hand) would park the job in a set no
-- claim ever looks at: such a job waits in the main set.
local function pending_key(jk)
  local f = redis.call('HMGET', jk, 'group', 'lane')
  if f[2] and f[2] ~= '' then
    return is_open_lane(f[2]) and PENDING or lane_key(f[2]), f[2]
  end
  local group = f[1]
  if group and group ~= '' and redis.call('HEXISTS', LIMITS, group) == 1 then
    return group_pending(group), nil
  end
  return PENDING, nil
end

-- A pending job into its lane: the lane's head (its turn) when the lane was
-- empty, else behind it.
local function lane_add(lane, id, score)
  if redis.call('HINCRBY', LANE_SIZE, lane, 1) == 1 then
    redis.call('ZADD', TURNS, score, turn_member(id, lane))
  else
    redis.call('ZADD', lane_key(lane), score, id)
  end
end

-- A lane lost `n` jobs; its count goes when it reaches 0.
local function lane_shrink(lane, n)
  if redis.call('HINCRBY', LANE_SIZE, lane, -n) <= 0 then
    redis.call('HDEL', LANE_SIZE, lane)
  end
end

-- The lane's next job becomes its head, at the back of its band (a new
-- sequence number), or the lane is empty.
local function next_head(lane)
  local nxt = redis.call('ZPOPMIN', lane_key(lane), 1)
  if #nxt > 0 then
    local band = lane_parts(lane)
    redis.call('ZADD', TURNS, band * BAND + next_seq(1), turn_member(nxt[1], lane))
  end
end

-- A held head's turn back (at the back of its band); false when the lane has none held.
local function unhold(lane)
  local member = redis.call('HGET', HELD_HEAD, lane)
  if not member then
    return false
  end
  redis.call('HDEL', HELD_HEAD, lane)
  redis.call('ZREM', HELD, member)
  local band, task = lane_parts(lane)
  if task then
    redis.call('ZREM', PREFIX .. 'held_task:' .. task, lane)
  end
  redis.call('ZADD', TURNS, band * BAND + next_seq(1), member)
  return true
end

-- The search index (app.find_jobs, `taskforge jobs`): one sorted set per
-- queue whose members all score 0, so it sorts by their bytes, and a range of
-- members sharing a prefix is one ZREVRANGEBYLEX.  Each member ends in the
-- job's *stamp*, its creation time (13 digits of ms) then its id (length-
-- prefixed), so every prefix lists its jobs newest first by creation, and one
-- stamp is a place in all of them at once (a page's cursor).  Per job:
--   'a' <stamp> <#task>:<task><key>   every job (task and key ride along, for the sweep)
--   't' <#task>:<task> <stamp>        by task
--   'k' <#key>:<key> <stamp>          by key, for a job with one
--   'd' <stamp>, 'c' <stamp>          while it is dead, once it is cancelled
-- A new job's entries go in with the record, in one ZADD; a death or a
-- cancel adds one more, a dead job retried loses its 'd'; a deleted job
-- loses them all.  A record that expires leaves its entries behind until the
-- sweep in reclaim finds it gone.  The index is a view, so its writes go
-- through pcall: damage there must never stop a transition.
local INDEX = PREFIX .. 'index'
local function index_stamp(created, id)
  return string.format('%013d', tonumber(created) or 0) .. #id .. ':' .. id
end

local function index_entries(id, created, task, key)
  local stamp = index_stamp(created, id)
  local out = {'a' .. stamp .. #task .. ':' .. task .. key, 't' .. #task .. ':' .. task .. stamp}
  if key ~= '' then
    out[3] = 'k' .. #key .. ':' .. key .. stamp
  end
  return out, stamp
end

-- Members into the index in one ZADD per 1,000 (unpack has a limit).
local function index_add(members)
  for first = 1, #members, 1000 do
    local args = {}
    for i = first, math.min(first + 999, #members) do
      args[#args + 1] = 0
      args[#args + 1] = members[i]
    end
    redis.pcall('ZADD', INDEX, unpack(args))
  end
end

-- A job's final-state entry ('d' dead, 'c' cancelled) in (`on`) or out.
local function index_mark(jk, id, letter, on)
  local created = redis.pcall('HGET', jk, 'created_at')
  if type(created) == 'string' then
    if on then
      redis.pcall('ZADD', INDEX, 0, letter .. index_stamp(created, id))
    else
      redis.pcall('ZREM', INDEX, letter .. index_stamp(created, id))
    end
  end
end

-- EXPIRING holds one member per finished record that will expire: its 'a'
-- entry without the 'a' (stamp, task, key: every entry of the job can be
-- named from it), scored by when the record expires (ms).  The end of a job
-- adds it (and moves it, when a job ends again); a record that stops
-- expiring (a dead job retried) or is deleted loses it.  So the sweep takes the entries whose
-- record is due to go as one range from the bottom, in slices, and every
-- member it looks at is due: it keeps up with any rate jobs finish at.
local EXPIRING = PREFIX .. 'expiring'

-- A job about to be deleted: every entry it may have, and its EXPIRING member.
local function index_drop(jk, id)
  local f = redis.pcall('HMGET', jk, 'created_at', 'task', 'key')
  if type(f) == 'table' and type(f[1]) == 'string' then
    local members, stamp = index_entries(id, f[1], f[2] or '', f[3] or '')
    redis.pcall('ZREM', EXPIRING, string.sub(members[1], 2))
    members[#members + 1] = 'd' .. stamp
    members[#members + 1] = 'c' .. stamp
    redis.pcall('ZREM', INDEX, unpack(members))
  end
end

-- A finished record's EXPIRING member, at `at` (ms) or (nil) out: from the
-- fields created_at, task and key (nil or junk: a record with no entries).
local function index_expire(created, task, key, id, at)
  if type(created) ~= 'string' or type(task) ~= 'string' then
    return
  end
  local a = index_entries(id, created, task, type(key) == 'string' and key or '')[1]
  if at then
    redis.pcall('ZADD', EXPIRING, at, string.sub(a, 2))
  else
    redis.pcall('ZREM', EXPIRING, string.sub(a, 2))
  end
end

-- Every entry of the job an 'a' entry (without its 'a': `rest`) names, and
-- its id; nil for a member this index never writes.
local function entries_named(rest)
  local colon = string.find(rest, ':', 14, true)
  local n = colon and tonumber(string.sub(rest, 14, colon - 1))
  local id = n and string.sub(rest, colon + 1, colon + n)
  if not id or id == '' then
    return nil
  end
  local stamp = string.sub(rest, 1, colon + n)
  local out = {'a' .. rest, 'd' .. stamp, 'c' .. stamp}
  local tail = string.sub(rest, colon + n + 1)
  local tcolon = string.find(tail, ':', 1, true)
  local tn = tcolon and tonumber(string.sub(tail, 1, tcolon - 1))
  if tn then
    local task, key = string.sub(tail, tcolon + 1, tcolon + tn), string.sub(tail, tcolon + tn + 1)
    out[#out + 1] = 't' .. #task .. ':' .. task .. stamp
    if key ~= '' then
      out[#out + 1] = 'k' .. #key .. ':' .. key .. stamp
    end
  end
  return out, id
end

-- Members out of a sorted set, 1,000 per ZREM (unpack has a limit).
local function zrem_all(key, members)
  for first = 1, #members, 1000 do
    redis.pcall('ZREM', key, unpack(members, first, math.min(first + 999, #members)))
  end
end

-- EXPIRING members one reclaim looks at (a sweep call: its caller's limit).
local SWEEP_SLICE = 200
-- One step of the sweep of the entries whose record expired: up to `limit`
-- members of EXPIRING due by `now`, from the bottom.  A job whose record is
-- gone loses every entry; one whose record is still there (it expires a
-- moment later than its score said) is scored again by its TTL, and one that
-- no longer expires (retried meanwhile) just leaves EXPIRING.  Returns how
-- many members it took, and whether more may be due (a full slice).
local function sweep_expiring(now, limit)
  local due = redis.pcall('ZRANGEBYSCORE', EXPIRING, '-inf', now, 'LIMIT', 0, limit)
  if type(due) ~= 'table' or due.err or #due == 0 then
    return 0, false
  end
  local gone, later = {}, {}
  for _, rest in ipairs(due) do
    local members, id = entries_named(rest)
    if id then
      local ttl = redis.call('PTTL', job_key(id))
      if ttl == -2 then
        for _, m in ipairs(members) do
          gone[#gone + 1] = m
        end
      elseif ttl > 0 then
        later[#later + 1] = now + ttl
        later[#later + 1] = rest
      end
    end
  end
  zrem_all(EXPIRING, due)
  zrem_all(INDEX, gone)
  for first = 1, #later, 1000 do
    redis.pcall('ZADD', EXPIRING, unpack(later, first, math.min(first + 999, #later)))
  end
  return #due, #due == limit
end

-- The backstop sweep, for entries EXPIRING does not name (written before it
-- existed, or left by a record deleted some other way): up to SWEEP_INDEX 'a'
-- entries of jobs created before `before` (ms), from the place kept in
-- INDEX_AT on.  A job whose record is gone loses all its entries; the entries
-- of a job still there (one that waited or ran long, a dead one kept longer)
-- are looked at again when the sweep comes round.
local INDEX_AT = PREFIX .. 'index_at'
local SWEEP_INDEX = 100
local function sweep_index(before)
  local at = redis.pcall('GET', INDEX_AT)
  local low = type(at) == 'string' and ('(' .. at) or '[a'
  local found = redis.pcall('ZRANGEBYLEX', INDEX, low, '(a' .. string.format('%013d', before), 'LIMIT', 0, SWEEP_INDEX)
  if type(found) ~= 'table' or found.err then
    return
  end
  local gone = {}
  for _, member in ipairs(found) do
    local members, id = entries_named(string.sub(member, 2))
    if not id then
      gone[#gone + 1] = member  -- not an entry this index writes
    elseif redis.call('EXISTS', job_key(id)) == 0 then
      for _, m in ipairs(members) do
        gone[#gone + 1] = m
      end
    end
  end
  zrem_all(INDEX, gone)
  if #found < SWEEP_INDEX then
    redis.pcall('DEL', INDEX_AT)
  else
    redis.pcall('SET', INDEX_AT, found[#found])
  end
end

-- pending_key reads the limits hash (HEXISTS) half-way through a transition
-- for a limited task's job; scripts that may get there read it up front.
local function need_limits()
  redis.call('HEXISTS', LIMITS, '')
end

-- A job into its pending set as state pending, with sequence number `seq`
-- (nil: a new one at the back of its line, for an open lane the key's next
-- turn).  A keyed job of a task with limits goes into its lane.
local function add_pending(id, jk, seq)
  local key, lane = pending_key(jk)
  local priority = redis.call('HGET', jk, 'priority')
  if lane and key == PENDING then
    local band = math.floor(pending_score(priority, 0) / BAND)
    local score
    if seq then
      score = pending_score(priority, seq)  -- back at its own turn: its key's last is at least that
      local last = tonumber(redis.pcall('HGET', KEY_TURNS, lane))
      if not last or last < score then
        redis.pcall('HSET', KEY_TURNS, lane, score)
      end
    else
      local book = {fronts = {}}
      score = take_turn(book, lane, band)
      write_turns(book)
      seq = score - band * BAND
    end
    redis.call('HSET', jk, 'state', 'pending', 'seq', seq, 'token', '')
    redis.call('ZADD', PENDING, score, id)
    return
  end
  seq = seq or next_seq(1)
  redis.call('HSET', jk, 'state', 'pending', 'seq', seq, 'token', '')
  local score = pending_score(priority, seq)
  if lane then
    lane_add(lane, id, score)
    count_lane_jobs({[lane_parts(lane)] = 1})
  else
    redis.call('ZADD', key, score, id)
  end
end

-- A pending job out of its set (cancelled, dead-lettered, debounced again);
-- a lane's head hands its turn to the lane's next job.
local function remove_pending(id, jk)
  local key, lane = pending_key(jk)
  if not lane then
    redis.call('ZREM', key, id)
    return
  end
  if key == PENDING then
    redis.call('ZREM', PENDING, id)  -- its key's entry may be stale now: the sweeps see to it
    return
  end
  local member = turn_member(id, lane)
  if redis.call('ZREM', TURNS, member) == 1 then
    next_head(lane)
  elseif redis.call('ZREM', HELD, member) == 1 then
    redis.call('HDEL', HELD_HEAD, lane)
    next_head(lane)
  elseif redis.call('ZREM', key, id) == 0 then
    return
  end
  lane_shrink(lane, 1)
  count_lane_jobs({[lane_parts(lane)] = -1})
end

-- Put a job at the back of its priority (a new sequence number).
local function make_pending(id, jk)
  add_pending(id, jk, nil)
end

-- A dead job back at the back of its line with a fresh set of attempts
-- (retry_dead, and replan_steps reviving a resumed workflow's dead step): its
-- record and its stream stop expiring, and a leftover done list, which would make every
-- result() wait return at once, goes.  The caller has taken it off DEAD.
local function revive_dead(id, jk)
  redis.call('PERSIST', jk)
  redis.call('PERSIST', stream_key(id))
  redis.call('HSET', jk, 'attempts', 0)
  redis.call('HDEL', jk, 'finished_at', 'result', 'waiting', 'abort')
  redis.call('UNLINK', PREFIX .. 'done:' .. id)
  index_mark(jk, id, 'd', false)
  local f = redis.call('HMGET', jk, 'created_at', 'task', 'key')
  index_expire(f[1], f[2], f[3], id, nil)
  make_pending(id, jk)
end

-- Put a job back where it stood in line (its original sequence number), for
-- jobs that were taken but not run to the end through no fault of their own.
-- A junk seq field takes a new place at the back.
local function restore_pending(id, jk)
  local seq = tonumber(redis.call('HGET', jk, 'seq'))
  if not seq or seq ~= seq or seq < 0 or seq >= BAND or seq ~= math.floor(seq) then
    seq = nil
  end
  add_pending(id, jk, seq)
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
-- HSET.  `meta` is {unique, waiting, workflow, stream_length, created_at,
-- task, key} when the caller already read those fields, else nil: every
-- redis.call costs a few microseconds inside Redis, so the hot path reads
-- each job's fields once.  A job that streamed gets its stream the record's
-- expiry; one that did not pays nothing for streams.  The record's EXPIRING
-- member says when its index entries go.
local function finish(id, jk, state, now, ttl, extra, meta)
  meta = meta or redis.call('HMGET', jk, 'unique', 'waiting', 'workflow', 'stream_length', 'created_at', 'task', 'key')
  release_unique(id, meta[1])
  local fields = {'state', state, 'finished_at', now, 'token', ''}
  for _, v in ipairs(extra or {}) do
    fields[#fields + 1] = v
  end
  redis.call('HSET', jk, unpack(fields))
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
    remove_pending(id, jk)
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

local function is_job(jk)
  return redis.call('TYPE', jk)['ok'] == 'hash'
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
-- place in the rate window, which expires with the window.
local function count_start(spec, ak, rk, id, attempts, now)
  if spec.concurrency > 0 then
    redis.call('SADD', ak, id)
  end
  if spec.rate > 0 then
    redis.call('ZADD', rk, now, id .. ':' .. tostring(attempts))
    redis.call('PEXPIRE', rk, spec.period)
  end
end

-- The pending set whose head is the best job allowed to start now: the main
-- set, a limited task's set whose limits allow it, or (`keyed`) the lanes'
-- turns.  `groups` is HKEYS of the limits hash.  Returns key, group (nil for
-- the main set and the turns), the ms until a blocked group may start (-1),
-- the head's score, and the next best head's score (nil: none), up to which
-- a batch may be taken from the best.
local function best_ready(now, groups, keyed)
  local best_key, best_group, best_score, second = nil, nil, nil, nil
  local function offer(key, group, score)
    if best_score == nil or score < best_score then
      second = best_score
      best_key, best_group, best_score = key, group, score
    elseif second == nil or score < second then
      second = score
    end
  end
  local head = redis.call('ZRANGE', PENDING, 0, 0, 'WITHSCORES')
  if #head > 0 then
    offer(PENDING, nil, tonumber(head[2]))
  end
  if keyed then
    local turn = redis.call('ZRANGE', TURNS, 0, 0, 'WITHSCORES')
    if #turn > 0 then
      offer(TURNS, nil, tonumber(turn[2]))
    end
  end
  local blocked_wait = -1
  for _, group in ipairs(groups) do
    local key = group_pending(group)
    local ghead = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #ghead > 0 and (best_score == nil or tonumber(ghead[2]) < best_score) then
      local ok, wait = group_allows(group, now)
      if ok then
        offer(key, group, tonumber(ghead[2]))
      elseif wait >= 0 and (blocked_wait < 0 or wait < blocked_wait) then
        blocked_wait = wait
      end
    end
  end
  return best_key, best_group, blocked_wait, best_score, second
end

-- Up to `want` members off the front of `key` (ZPOPMIN's flat list), none
-- scored above `bound` (nil: no bound; those popped past it go back).  Also
-- whether the set is empty now.
local function pop_upto(key, want, bound)
  local popped = redis.call('ZPOPMIN', key, want)
  local empty = #popped < 2 * want
  if bound then
    for p = 1, #popped, 2 do
      if tonumber(popped[p + 1]) > bound then
        local back, kept = {}, {}
        for q = p, #popped, 2 do
          back[#back + 1], back[#back + 2] = popped[q + 1], popped[q]
        end
        redis.call('ZADD', key, unpack(back))
        for q = 1, p - 1 do
          kept[q] = popped[q]
        end
        return kept, false
      end
    end
  end
  return popped, empty
end

-- Hold a limited lane's head back: out of the turns until `wait` ms from now
-- (-1: until a slot frees, which gives the turn back at once; looked at again
-- after HELD_RECHECK_MS all the same, should that release never come).  A
-- lane its task's own limit stopped also waits in the task's held_task set,
-- from which each slot of the task that frees gives one lane its turn back.
local HELD_RECHECK_MS = 5000
local function hold(member, lane, wait, now, task)
  redis.call('ZADD', HELD, now + ((wait >= 0 and wait < HELD_RECHECK_MS) and wait or HELD_RECHECK_MS), member)
  redis.call('HSET', HELD_HEAD, lane, member)
  if task then
    redis.call('ZADD', PREFIX .. 'held_task:' .. task, now, lane)
  end
end

-- Held heads whose time has come get their turn back (at most `limit`).
local function release_held(now, limit)
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', HELD, '-inf', now, 'LIMIT', 0, limit)) do
    local _, lane = member_parts(member)
    if not unhold(lane) then
      redis.call('ZREM', HELD, member)  -- no lane knows it (edited by hand): let it go
    end
  end
end

-- The lanes' next jobs: up to `want` heads off the front of the turns (none
-- past `bound`), and, when the turns ran out, a fair share of `want` from
-- each lane without limits; each lane's next job becomes its head at the
-- back of its band.  The lanes' counts come in one HMGET, so a lane is popped
-- only for jobs this claim takes or a next head.  A limited lane gives one
-- claim one job at most (`served`: the limited lanes this claim took from),
-- so the jobs its limit lets run at once go to as many lanes of workers, not
-- into one worker's batch; its turn goes back untouched.  Returns rows for
-- the claim ({id, jk, nil, score, origin, group, limited lane rest, spec,
-- lane, member}: the caller reads the record and fills in the attempt), the
-- ms until a held lane may start (-1), how many turns it looked at, and how
-- many it gave back untouched.
local function lane_jobs(want, bound, now, served)
  local turns, empty = pop_upto(TURNS, want, bound)
  local heads = #turns / 2
  if heads == 0 then
    return {}, -1, 0, 0
  end
  local share = empty and math.ceil(want / heads) or 1
  -- Plain arrays, not a table per head: this loop runs for every keyed job.
  local lanes, ids = {}, {}
  for i = 1, heads do
    ids[i], lanes[i] = member_parts(turns[2 * i - 1])
  end
  local sizes = redis.call('HMGET', LANE_SIZE, unpack(lanes))
  local rows, per_lane, untouched, wait, started = {}, {}, {}, -1, {}
  local again_band, again_member, resized, emptied, taken = {}, {}, {}, {}, {}
  for i = 1, heads do
    local lane, id, member, score = lanes[i], ids[i], turns[2 * i - 1], tonumber(turns[2 * i])
    local band, task, rest = lane_parts(lane)
    local ok, spec, w, by_task = true, nil, -1, false
    if task and served[rest] then
      ok = false
      untouched[#untouched + 1], untouched[#untouched + 2] = score, member
    elseif task then
      ok, w, spec, by_task = lane_allows(rest, task, now, started[task] or 0)
      if not ok then
        hold(member, lane, w, now, by_task and task)
        if w >= 0 and (wait < 0 or w < wait) then
          wait = w
        end
      end
    end
    if ok then
      local group = task and redis.call('HEXISTS', LIMITS, task) == 1 and task or nil
      local limited = task and rest or nil
      local head = {id, job_key(id), nil, score, TURNS, group, limited, spec, lane, member}
      local mine = {head}
      if share == 1 then
        rows[#rows + 1] = head  -- one job per lane: the batch is the heads, in turn order
      else
        per_lane[#per_lane + 1] = mine
      end
      if task then
        started[task] = (started[task] or 0) + 1
        served[rest] = true
      end
      -- The lane's count (the head included): junk or none means the head
      -- alone, so a damaged count never strands the lane's other jobs.
      local size = tonumber(sizes[i]) or (1 + redis.call('ZCARD', lane_key(lane)))
      local extra = task and 0 or math.min(share - 1, size - 1)
      if size - 1 > 0 then
        local lk = lane_key(lane)
        local asked = math.min(size - 1, extra + 1)
        local popped = redis.call('ZPOPMIN', lk, asked)
        if #popped < 2 * asked then
          size = 1 + #popped / 2  -- the count ran ahead of the lane (edited by hand): trust the lane
        end
        for p = 1, 2 * extra, 2 do
          if popped[p] then
            mine[#mine + 1] = {popped[p], job_key(popped[p]), nil, tonumber(popped[p + 1]), lk, group, limited, spec,
              lane}
          end
        end
        local nxt = popped[2 * extra + 1]
        if nxt then
          again_band[#again_band + 1], again_member[#again_member + 1] = band, turn_member(nxt, lane)
        end
      end
      local left = size - #mine
      if left > 0 then
        resized[#resized + 1], resized[#resized + 2] = lane, left
      else
        emptied[#emptied + 1] = lane
      end
      taken[band] = (taken[band] or 0) - #mine
    end
  end
  if #resized > 0 then
    redis.call('HSET', LANE_SIZE, unpack(resized))
  end
  if #emptied > 0 then
    redis.call('HDEL', LANE_SIZE, unpack(emptied))
  end
  count_lane_jobs(taken)
  if #untouched > 0 then
    redis.call('ZADD', TURNS, unpack(untouched))
  end
  local n = #again_band
  if n > 0 then
    local last = next_seq(n)
    local args = {}
    for i = 1, n do
      args[2 * i - 1], args[2 * i] = again_band[i] * BAND + last - n + i, again_member[i]
    end
    redis.call('ZADD', TURNS, unpack(args))
  end
  -- In turns within the batch too: every lane's first job, then every second one.
  for r = 1, share > 1 and share or 0 do
    for _, mine in ipairs(per_lane) do
      if mine[r] then
        rows[#rows + 1] = mine[r]
      end
    end
  end
  return rows, wait, heads, #untouched / 2
end

-- Jobs not finished yet (pending in any set, scheduled, retrying, running): what max_size bounds.
local function unfinished_count()
  local size = redis.call('ZCARD', PENDING) + redis.call('ZCARD', SCHEDULED) + redis.call('ZCARD', RUNNING)
  for _, group in ipairs(redis.call('HKEYS', LIMITS)) do
    size = size + redis.call('ZCARD', group_pending(group))
  end
  local laned = redis.call('HGETALL', LANE_JOBS)
  for i = 2, #laned, 2 do
    size = size + math.max(0, tonumber(laned[i]) or 0)
  end
  return size
end

-- What a claim reads of a job, in one HMGET: the fields claim_ready itself
-- needs (f[1] to f[CLAIM_OWN]), then CLAIMED, the fields it hands to the
-- worker as they are (declared in broker/record.py: ClaimRow).
local CLAIM_OWN = 7
local CLAIM_FIELDS = {'state', 'attempts', 'token', 'seq', 'expires', 'lane', 'unstarted', unpack(CLAIMED)}

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

-- The claim of popped jobs (rows: {id, jk, attempts, score, key, group,
-- limited lane, its per-key spec, lane}: the pending set it came from and
-- its score, to put it back; the task-wide group and the limited lane whose
-- starts it counts): their leases first, in one ZADD, so a damaged running
-- set fails the claim before anything is written; then each job's state, and
-- its limits' concurrency slots and rate windows.  `attempts` nil: the field
-- holds junk, left as evidence (a reclaim dead-letters such a job too).
-- Every job is charged its attempt here, but only the claim's first sound
-- job (`charged` false: none yet; `fields` the rows' claim fields) starts at
-- once: each later one of a batch is marked `unstarted` until its worker
-- says it started (settle.lua), so a worker that dies whole before then
-- leaves it to a reclaim that refunds the attempt (reclaim.lua).  Returns
-- whether the claim has charged its first job now.
local function take(rows, token, now, lease, fields, charged)
  local leases = {}
  for i, row in ipairs(rows) do
    leases[2 * i - 1], leases[2 * i] = now + lease, row[1]
  end
  local ok = redis.pcall('ZADD', RUNNING, unpack(leases))
  if type(ok) ~= 'number' then
    for _, row in ipairs(rows) do
      -- Back where it came from: a lane's head to the turns, its other jobs to the lane.
      redis.call('ZADD', row[5], row[4], row[10] or row[1])
      if row[9] then
        redis.call('HINCRBY', LANE_SIZE, row[9], 1)
        count_lane_jobs({[lane_parts(row[9])] = 1})
      end
    end
    error('taskforge: ' .. RUNNING .. ' cannot hold claims')
  end
  for i, row in ipairs(rows) do
    local id, jk, attempts, group, lane = row[1], row[2], row[3], row[6], row[7]
    local f = fields[i]
    if attempts and f[1] == 'pending' and not charged then
      charged = true
      redis.call('HSET', jk, 'state', 'running', 'started_at', now, 'token', token, 'attempts', attempts)
      if f[7] then
        redis.call('HDEL', jk, 'unstarted')  -- left by an earlier claim
      end
    elseif attempts then
      redis.call('HSET', jk, 'state', 'running', 'started_at', now, 'token', token, 'attempts', attempts,
        'unstarted', '1')
    else
      redis.call('HSET', jk, 'state', 'running', 'started_at', now, 'token', token)
    end
    if group then
      count_start(limit_spec(LIMITS, group), PREFIX .. 'active:' .. group, PREFIX .. 'rate:' .. group, id,
        attempts, now)
    end
    if lane then
      count_start(row[8], PREFIX .. 'key_active:' .. lane, PREFIX .. 'key_rate:' .. lane, id, attempts, now)
    end
  end
  return charged
end

-- How many expired jobs one claim ends at most before it answers (it may answer
-- empty-handed, with wait 0: the client calls again at once).
local EXPIRE_LIMIT = 100

-- How many lanes one claim looks at most (held back or empty ones among
-- them) before it answers, as for expired jobs.
local LANES_LIMIT = 256

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
  if opts.promote and opts.limited then
    release_held(now, limit)
  end
  local out = {0, -1}
  local ids = {}
  local blocked_wait = -1
  local expired, lanes_seen, served = 0, 0, {}
  local top = 0  -- the highest turn of a keyed job claimed from PENDING (its sequence part)
  local charged = false  -- the claim's first sound job is taken: the others wait unstarted
  while #ids < count and expired < EXPIRE_LIMIT and lanes_seen < LANES_LIMIT do
    -- Without limited tasks or limited keys the whole batch comes off the main
    -- set in one ZPOPMIN (every redis.call costs a few microseconds); with
    -- them, from whichever set holds the best job a limit allows: one job at
    -- a time where a task's limits must be asked, else as many as come
    -- before the next best set's head.
    local rows = {}
    local popped_n, want, empty = 0, count - #ids, false
    if opts.limited then
      local key, group, wait, _, bound = best_ready(now, groups, true)
      blocked_wait = wait
      if not key then
        break
      end
      if key == TURNS then
        local lane_wait, seen, untouched
        rows, lane_wait, seen, untouched = lane_jobs(want, bound, now, served)
        lanes_seen = lanes_seen + seen
        if lane_wait >= 0 and (blocked_wait < 0 or lane_wait < blocked_wait) then
          blocked_wait = lane_wait
        end
        popped_n = #rows
        empty = #rows == 0 and redis.call('EXISTS', TURNS) == 0
        if #rows == 0 and not empty and untouched == 0 then
          -- Every lane taken was held back or empty: look again (the turns shrank).
          popped_n = -1
        end
      else
        if group or #groups > 0 then
          want = 1
        end
        local popped
        popped, empty = pop_upto(key, want, group == nil and #groups == 0 and bound or nil)
        for p = 1, #popped, 2 do
          rows[#rows + 1] = {popped[p], job_key(popped[p]), nil, tonumber(popped[p + 1]), key, group}
        end
        popped_n = #rows
      end
    else
      local popped = redis.call('ZPOPMIN', PENDING, want)
      for p = 1, #popped, 2 do
        rows[#rows + 1] = {popped[p], job_key(popped[p]), nil, popped[p + 1], PENDING}
      end
      popped_n = #rows
      empty = #popped < 2 * want
    end
    if popped_n == 0 then
      break
    end
    local taken, fields = {}, {}
    for _, row in ipairs(rows) do
      local id, jk = row[1], row[2]
      local f = read_claim_fields(jk)
      local state = f and f[1]
      if f and f[6] and f[6] ~= '' and row[5] == PENDING then
        local score = tonumber(row[4])
        top = math.max(top, score - math.floor(score / BAND) * BAND)
      end
      if f and f[5] and state == 'pending' and is_expired(f[5], now) then
        end_expired(id, jk, now)
        expired = expired + 1
      elseif f and state ~= 'succeeded' and state ~= 'dead' and state ~= 'cancelled'
          and (state ~= 'running' or not redis.call('ZSCORE', RUNNING, id)) then
        -- Pending, or a record with junk in its state or attempts, or one that
        -- says running while no claim holds it (dropped, it would be in no set
        -- for ever): claimed alike, and the client dead-letters a damaged one
        -- with the reason (claim_row says which); a lease keeps it safe meanwhile.
        row[3] = next_attempt(f[2])
        taken[#taken + 1] = row
        fields[#taken] = f
      else
        -- An id whose record expired or was deleted by hand: it can never run.
        dropped = dropped + 1
      end
    end
    if #taken > 0 then
      charged = take(taken, token, now, lease, fields, charged)
      for i, row in ipairs(taken) do
        claim_row(out, row[1], fields[i], row[3])
        ids[#ids + 1] = row[1]
      end
    end
    if empty and not opts.limited then
      break  -- the set is empty now
    end
  end
  if top > 0 then
    seq_past(top)
  end
  if #ids == 0 and (expired >= EXPIRE_LIMIT or lanes_seen >= LANES_LIMIT) then
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
    local held = redis.call('ZRANGE', HELD, 0, 0, 'WITHSCORES')
    if #held > 0 and (out[2] < 0 or tonumber(held[2]) - now < out[2]) then
      out[2] = math.max(0, tonumber(held[2]) - now)
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
-- A step with more inputs than INLINE_INPUTS (a chord's body of 100,000
-- members) gets their count instead, {j, spec, n}: the client reads the
-- results in slices of its own (delivery.py, `with_inputs`), so that no
-- call holds Redis for all of them. They cannot change meanwhile: a result
-- is written once, by its step's first report, before the step can go.
local INLINE_INPUTS = 2000
local function launch_entry(rk, j, inline)
  local f = redis.call('HMGET', rk, 'spec:' .. j, 'input:' .. j)
  local entry = {j, f[1] or ''}
  local inputs = split(f[2])
  if #inputs > INLINE_INPUTS and not inline then
    entry[3] = #inputs
    return entry
  end
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
    local entry = launch_entry(rk, k, true)  -- the failed step's summary follows its inputs
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

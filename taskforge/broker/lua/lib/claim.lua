-- The claim: ready jobs handed to a worker under one token, each with its
-- lease, its attempt and its limits' counts, and the row the worker reads.

-- What a claim reads of a job, in one HMGET: the fields claim_ready itself
-- needs (f[1] to f[CLAIM_OWN]), then CLAIMED, the fields it hands to the
-- worker as they are (declared in broker/record.py: ClaimRow).
local CLAIM_OWN = 7
local CLAIM_FIELDS = {'state', 'attempts', 'token', 'seq', 'expires', 'lane', 'unstarted', unpack(CLAIMED)}


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
      count_group_start(group, id, token, now)
    end
    if lane then
      count_start(row[8], PREFIX .. 'key_active:' .. lane, PREFIX .. 'key_rate:' .. lane, id, token, now)
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

-- One pull of a claim from the main pending set alone (the queue has no
-- limited task or lane): up to `want` jobs in one ZPOPMIN, every redis.call
-- costing a few microseconds.  Returns the rows (as `take` reads them), how
-- many, and whether the set is empty now.
local function pop_pending(want)
  local rows = {}
  local popped = redis.call('ZPOPMIN', PENDING, want)
  for p = 1, #popped, 2 do
    rows[#rows + 1] = {popped[p], job_key(popped[p]), nil, popped[p + 1], PENDING}
  end
  return rows, #rows, #popped < 2 * want
end

-- One pull of a claim from a queue with limited tasks or lanes: from
-- whichever set holds the best job a limit allows; one job at a time where
-- a task's limits must be asked, else as many as come before the next best
-- set's head.  Keeps on `claim` when a job held back may start
-- (blocked_wait) and how many lanes were looked at.  Returns the rows, how
-- many (0: nothing to take; -1: every lane taken was held back or empty,
-- so look again: the turns shrank), and whether the set is empty now.
local function pop_limited(claim, want, now)
  local key, group, wait, _, bound = best_ready(now, claim.groups, true)
  claim.blocked_wait = wait
  if not key then
    return {}, 0, false
  end
  if key == TURNS then
    local rows, lane_wait, seen, untouched = lane_jobs(want, bound, now, claim.served)
    claim.lanes_seen = claim.lanes_seen + seen
    if lane_wait >= 0 and (claim.blocked_wait < 0 or lane_wait < claim.blocked_wait) then
      claim.blocked_wait = lane_wait
    end
    local empty = #rows == 0 and redis.call('EXISTS', TURNS) == 0
    if #rows == 0 and not empty and untouched == 0 then
      return rows, -1, empty
    end
    return rows, #rows, empty
  end
  local groups = claim.groups
  if group or #groups > 0 then
    want = 1
  end
  local popped, empty = pop_upto(key, want, group == nil and #groups == 0 and bound or nil)
  local rows = {}
  for p = 1, #popped, 2 do
    rows[#rows + 1] = {popped[p], job_key(popped[p]), nil, tonumber(popped[p + 1]), key, group}
  end
  return rows, #rows, empty
end

-- The rows of one pull, sorted: a job to claim gets its next attempt, one
-- not started by its `expires` time ends, an id with no job to run is
-- dropped.  Counts the expired and the dropped on `claim`, and keeps there
-- the highest turn of a keyed job taken from PENDING.  Returns the rows to
-- claim and their fields.
local function sift(claim, rows, now)
  local taken, fields = {}, {}
  for _, row in ipairs(rows) do
    local id, jk = row[1], row[2]
    local f = read_claim_fields(jk)
    local state = f and f[1]
    if f and f[6] and f[6] ~= '' and row[5] == PENDING then
      local score = tonumber(row[4])
      claim.top = math.max(claim.top, score - math.floor(score / BAND) * BAND)
    end
    if f and f[5] and state == 'pending' and is_expired(f[5], now) then
      end_expired(id, jk, now)
      claim.expired = claim.expired + 1
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
      claim.dropped = claim.dropped + 1
    end
  end
  return taken, fields
end

-- How long a claim that took nothing may wait before it asks again (ms;
-- -1: until woken): until the next scheduled job is due, a limit that held
-- a job back lets it start (`blocked_wait`), or a held head's time comes,
-- whichever is first.
local function idle_wait(now, blocked_wait)
  local wait = -1
  local nxt = redis.call('ZRANGE', SCHEDULED, 0, 0, 'WITHSCORES')
  if #nxt > 0 then
    wait = math.max(0, tonumber(nxt[2]) - now)
  end
  if blocked_wait >= 0 and (wait < 0 or blocked_wait < wait) then
    wait = blocked_wait
  end
  local held = redis.call('ZRANGE', HELD, 0, 0, 'WITHSCORES')
  if #held > 0 and (wait < 0 or tonumber(held[2]) - now < wait) then
    wait = math.max(0, tonumber(held[2]) - now)
  end
  return wait
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
  -- What the pulls share: the limited tasks, when a held-back job may start,
  -- jobs expired and lanes looked at (both bound the loop), the limited
  -- lanes served, the highest turn of a keyed job claimed from PENDING (its
  -- sequence part), and the ids dropped.
  local claim = {groups = opts.limited and redis.call('HKEYS', LIMITS) or {}, blocked_wait = -1, expired = 0,
    lanes_seen = 0, served = {}, top = 0}
  claim.dropped = opts.promote and promote_due(now, limit) or 0
  if opts.promote and opts.limited then
    release_held(now, limit)
  end
  local out, claimed = {0, -1}, 0
  local charged = false  -- the claim's first sound job is taken: the others wait unstarted
  while claimed < count and claim.expired < EXPIRE_LIMIT and claim.lanes_seen < LANES_LIMIT do
    local rows, popped_n, empty
    if opts.limited then
      rows, popped_n, empty = pop_limited(claim, count - claimed, now)
    else
      rows, popped_n, empty = pop_pending(count - claimed)
    end
    if popped_n == 0 then
      break
    end
    local taken, fields = sift(claim, rows, now)
    if #taken > 0 then
      charged = take(taken, token, now, lease, fields, charged)
      for i, row in ipairs(taken) do
        claim_row(out, row[1], fields[i], row[3])
      end
      claimed = claimed + #taken
    end
    if empty and not opts.limited then
      break  -- the set is empty now
    end
  end
  if claim.top > 0 then
    seq_past(claim.top)
  end
  if claimed == 0 and (claim.expired >= EXPIRE_LIMIT or claim.lanes_seen >= LANES_LIMIT) then
    out[1], out[2] = claim.dropped, 0
    return out
  end
  if claimed == 0 and not (opts.promote and opts.limited) then
    out = claim_ready(token, lease, limit, count, now, {promote = true, limited = true, unpaused = true})
    out[1] = out[1] + claim.dropped
    return out
  end
  out[1] = claim.dropped
  if claimed == 0 then
    out[2] = idle_wait(now, claim.blocked_wait)
  end
  return out
end

-- The claim options of a dequeue or chained claim from its ARGV flags ('1' = on).
local function claim_opts(promote, limited, retry)
  return {promote = promote == '1', limited = limited == '1', retry = retry == '1'}
end

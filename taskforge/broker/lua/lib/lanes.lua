-- Lanes: one key's ready jobs of one priority band.  A limited lane's head
-- waits in the turns, or held back by its task's limits; its other jobs wait
-- behind it.

-- A keyed job's lane (its `lane` field) names one key's ready jobs of one
-- priority band: "<band>:0:<key>" (an open lane), or "<band>:<n>:<task><key>"
-- (n = the task's length in bytes) for a task with limits, whose jobs are
-- checked against them.  An open lane's jobs wait in PENDING at their
-- turns (KEY_TURNS, in turns.lua).  A limited lane's jobs wait apart, and the
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

-- Pending: which set a ready job waits in, and the moves in and out of it
-- (a new place at the back, its old place back, revived from dead, taken out).

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

-- A dead job back at the back of its line with a fresh set of attempts and of
-- worker losses (retry_dead, and replan_steps reviving a resumed workflow's dead step): its
-- record and its stream stop expiring, and a leftover done list, which would make every
-- result() wait return at once, goes.  The caller has taken it off DEAD.
local function revive_dead(id, jk)
  redis.call('PERSIST', jk)
  redis.call('PERSIST', stream_key(id))
  redis.call('HSET', jk, 'attempts', 0)
  redis.call('HDEL', jk, 'finished_at', 'result', 'waiting', 'abort', 'losses')
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

-- Jobs not finished yet (pending in any set, scheduled, retrying, deferred, running): what max_size bounds.
local function unfinished_count()
  local size = redis.call('ZCARD', PENDING) + redis.call('ZCARD', SCHEDULED) + redis.call('ZCARD', RUNNING) +
    redis.call('ZCARD', PREFIX .. 'deferred')
  for _, group in ipairs(redis.call('HKEYS', LIMITS)) do
    size = size + redis.call('ZCARD', group_pending(group))
  end
  local laned = redis.call('HGETALL', LANE_JOBS)
  for i = 2, #laned, 2 do
    size = size + math.max(0, tonumber(laned[i]) or 0)
  end
  return size
end

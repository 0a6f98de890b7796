-- What a claim takes from: the pending set with the best head a limit lets
-- start, and the lanes' heads in their turns.

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
      ok, w, spec, by_task = lane_allows(rest, task, now, started)
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

-- purge: delete up to `limit` jobs from one of the queue's sets, oldest first.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] which           'pending' | 'scheduled' | 'dead'
-- ARGV[3] limit
-- Returns how many were deleted; the caller repeats until 0, so a huge queue
-- is purged in slices that never block Redis for long.
local sets = {pending = PENDING, scheduled = SCHEDULED, dead = DEAD}
local key = sets[ARGV[2]]
if not key then
  return redis.error_reply('purge: unknown set ' .. tostring(ARGV[2]))
end
local ids = redis.call('ZRANGE', key, 0, tonumber(ARGV[3]) - 1)
if #ids == 0 and ARGV[2] == 'pending' then
  -- no keyed job waits in the main set now: its keys' turns go
  redis.call('UNLINK', KEY_TURNS)
  -- then the pending sets of rate- or concurrency-limited tasks
  for _, group in ipairs(redis.call('HKEYS', LIMITS)) do
    key = group_pending(group)
    ids = redis.call('ZRANGE', key, 0, tonumber(ARGV[3]) - 1)
    if #ids > 0 then
      break
    end
  end
end
if #ids == 0 and ARGV[2] == 'pending' then
  -- then the keyed jobs, a lane at a time: the jobs behind its head, then
  -- the head (in the turns, or held), and the lane's count with it
  for _, set in ipairs({TURNS, HELD}) do
    local member = redis.call('ZRANGE', set, 0, 0)[1]
    if member then
      local head, lane = member_parts(member)
      key = lane_key(lane)
      ids = redis.call('ZRANGE', key, 0, tonumber(ARGV[3]) - 1)
      if #ids == 0 then
        redis.call('ZREM', set, member)
        redis.call('HDEL', HELD_HEAD, lane)
        redis.call('HDEL', LANE_SIZE, lane)
        ids = {head}
      else
        lane_shrink(lane, #ids)
      end
      count_lane_jobs({[lane_parts(lane)] = -#ids})
      break
    end
  end
end
for _, id in ipairs(ids) do
  redis.call('ZREM', key, id)
  index_drop(job_key(id), id)
  redis.call('UNLINK', job_key(id), PREFIX .. 'done:' .. id, stream_key(id))
end
return #ids

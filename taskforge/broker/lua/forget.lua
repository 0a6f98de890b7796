-- forget: delete the keys of a queue that holds no job waiting, running or dead.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] phase           'tidy': a purge's last step, the queue's bookkeeping keys; 'forget': every key
-- ARGV[3] cursor          'forget': the SCAN cursor the last call returned ('0' to start)
-- ARGV[4] pattern         'forget': the prefix as a SCAN MATCH pattern, with '*' at its end
-- Returns {holding, cursor, deleted}: `holding` names what still holds a job ('' when nothing does:
-- only then does anything go); `cursor` is '0' once a forget has walked every key.
-- Each call checks the queue again before it deletes: a job sent between two calls of a forget
-- stops it, and a call deletes at most the keys of one SCAN step (1,000 looked at), so a forget
-- never blocks Redis for long. Finished jobs' records go with the rest.
local function holding()
  local sets = {
    {'pending', PENDING}, {'scheduled', SCHEDULED}, {'running', RUNNING}, {'dead', DEAD},
    {'lanes', TURNS}, {'held', HELD}, {'outbox', PREFIX .. 'outbox'},
    {'deferred', PREFIX .. 'deferred'}, {'depbox', PREFIX .. 'depbox'},
  }
  for _, set in ipairs(sets) do
    if redis.call('EXISTS', set[2]) == 1 then
      return set[1]
    end
  end
  for _, group in ipairs(redis.call('HKEYS', LIMITS)) do
    if redis.call('EXISTS', group_pending(group)) == 1 then
      return 'pending'
    end
  end
  return ''
end

local busy = holding()
if busy ~= '' then
  return {busy, '0', 0}
end
if ARGV[2] == 'tidy' then
  local deleted = redis.call('UNLINK', SEQ, WAKE, LANE_JOBS, LANE_SIZE, HELD_HEAD, KEY_TURNS, TURNS_AT, INDEX_AT)
  if redis.call('EXISTS', INDEX) == 1 and redis.call('ZCARD', INDEX) == 0 then
    deleted = deleted + redis.call('UNLINK', INDEX)
  end
  return {'', '0', deleted}
end
if ARGV[2] ~= 'forget' then
  return redis.error_reply('forget: unknown phase ' .. tostring(ARGV[2]))
end
local step = redis.call('SCAN', ARGV[3], 'MATCH', ARGV[4], 'COUNT', 1000)
local deleted = 0
if #step[2] > 0 then
  deleted = redis.call('UNLINK', unpack(step[2]))
end
return {'', step[1], deleted}

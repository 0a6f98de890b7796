-- workflow_create: store a new workflow, its steps and the sets that count them.
-- KEYS[1] record          the workflow's record (routes the call to the workflow's slot)
-- ARGV[1] prefix          the workflow's key prefix
-- ARGV[2] steps           how many steps (indices 0 .. steps-1; an on_failure step is not one),
--                         or one piece of a big workflow (below)
-- ARGV[3..] fields        pairs: record field, value (spec:<i>, queue:<i>, next:<i>, input:<i>,
--                         after:<j> = the steps j waits for, on_failure, shape)
-- Returns 1, or 0 when the record exists already (a re-send after a lost
-- reply): nothing is changed, so a retry never resets a workflow under way.
-- No TTL: an open workflow never expires; end_workflow sets one.
--
-- A workflow too big for one call within the time budget (a group of
-- 100,000: broker/workflow_pieces.py) is staged in pieces under `new:` names
-- no reader knows, each expiring after ttl_ms: 'stage:<ttl_ms>:<from>:<to>'
-- stores its fields, opens steps from .. to-1, and takes the pseudo-field
-- '+wait:<j>' (a comma list) as members of step j's wait set.  Then
-- 'commit' renames the staged keys to their own names and marks the record
-- running: the workflow appears whole, once (a re-send answers 0), or,
-- after a producer died while staging, never (answer -1: its pieces expired).
local rk = KEYS[1]
if redis.call('EXISTS', rk) == 1 then
  return 0
end
local mode = ARGV[2]
local staged = PREFIX .. 'new:record'
if string.sub(mode, 1, 6) == 'stage:' then
  local ttl, from, to = string.match(mode, '^stage:(%d+):(%d+):(%d+)$')
  local touched, fields = {[staged] = true}, {}
  for i = 3, #ARGV, 2 do
    local j = string.match(ARGV[i], '^%+wait:(%d+)$')
    if j then
      in_chunks('SADD', PREFIX .. 'new:wait:' .. j, split(ARGV[i + 1]))
      redis.call('SADD', PREFIX .. 'new:waiting', j)
      touched[PREFIX .. 'new:wait:' .. j], touched[PREFIX .. 'new:waiting'] = true, true
    else
      fields[#fields + 1] = ARGV[i]
      fields[#fields + 1] = ARGV[i + 1]
    end
  end
  in_chunks('HSET', staged, fields)
  local open = {}
  for i = tonumber(from), tonumber(to) - 1 do
    open[#open + 1] = i
  end
  if #open > 0 then
    in_chunks('SADD', PREFIX .. 'new:open', open)
    touched[PREFIX .. 'new:open'] = true
  end
  for key in pairs(touched) do
    redis.call('PEXPIRE', key, tonumber(ttl))
  end
  return 1
elseif mode == 'commit' then
  if redis.call('EXISTS', staged) == 0 then
    return -1
  end
  local function settle(from, to)
    if redis.call('EXISTS', from) == 1 then
      redis.call('RENAME', from, to)
      redis.call('PERSIST', to)
    end
  end
  for _, j in ipairs(redis.call('SMEMBERS', PREFIX .. 'new:waiting')) do
    settle(PREFIX .. 'new:wait:' .. j, PREFIX .. 'wait:' .. j)
  end
  settle(PREFIX .. 'new:waiting', PREFIX .. 'waiting')
  settle(PREFIX .. 'new:open', PREFIX .. 'open')
  settle(staged, rk)
  local fields = {'state', 'running', 'created_at', now_ms()}
  redis.call('HSET', rk, unpack(fields))
  return 1
end
local fields = {'state', 'running', 'created_at', now_ms()}
local waiting = {}
for i = 3, #ARGV, 2 do
  local name, value = ARGV[i], ARGV[i + 1]
  fields[#fields + 1] = name
  fields[#fields + 1] = value
  local j = string.match(name, '^after:(%d+)$')
  if j then
    in_chunks('SADD', PREFIX .. 'wait:' .. j, split(value))
    waiting[#waiting + 1] = j
  end
end
in_chunks('HSET', rk, fields)
local open = {}
for i = 0, tonumber(ARGV[2]) - 1 do
  open[#open + 1] = i
end
in_chunks('SADD', PREFIX .. 'open', open)
in_chunks('SADD', PREFIX .. 'waiting', waiting)
return 1

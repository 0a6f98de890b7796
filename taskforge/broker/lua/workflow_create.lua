-- workflow_create: store a new workflow, its steps and the sets that count them.
-- KEYS[1] record          the workflow's record (routes the call to the workflow's slot)
-- ARGV[1] prefix          the workflow's key prefix
-- ARGV[2] steps           how many steps (indices 0 .. steps-1; an on_failure step is not one)
-- ARGV[3..] fields        pairs: record field, value (spec:<i>, queue:<i>, next:<i>, input:<i>,
--                         after:<j> = the steps j waits for, on_failure, shape)
-- Returns 1, or 0 when the record exists already (a re-send after a lost
-- reply): nothing is changed, so a retry never resets a workflow under way.
-- No TTL: an open workflow never expires; end_workflow sets one.
local rk = KEYS[1]
if redis.call('EXISTS', rk) == 1 then
  return 0
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

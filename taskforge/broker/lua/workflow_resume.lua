-- workflow_resume: a dead workflow runs again (WorkflowHandle.retry(), a dead step retried).
-- KEYS[1] record          the workflow's record (routes the call to the workflow's slot)
-- ARGV[1] prefix          the workflow's key prefix
-- ARGV[2] finish          '1': also answer for a running workflow (the client finishes a
--                         resume that was cut short); else a running one gets nothing back
-- Returns {state before the call ('gone': no such record; 'ending': dead, but the client
-- that recorded its death has not stopped its steps yet, so nothing was done), ready,
-- replan, on_failure}:
--   ready: as workflow_report answers it, every step free to go (open minus waiting);
--   replan: pairs of index, queue: those same steps, whose records in their queues the
--   client makes ready to go again (replan_steps) before it sends them;
--   on_failure: {} or {index, queue} of its on_failure step, whose finished record the
--   client drops, so a second death sends it afresh.
-- A dead workflow's steps that reported without a result (the dead ones, and any a
-- hand cancelled) are open again; every open step waits again for the open steps
-- before it; the end (state, times, error, failed step, settled, the done list and
-- the keys' TTL) is undone.  All in this one script: a crash leaves the workflow
-- dead or running, never half of each.  The steps that succeeded keep their results.
local rk = KEYS[1]
local f = redis.call('HMGET', rk, 'state', 'steps', 'on_failure')
local state = f[1]
if not state then
  return {'gone', {}, {}, {}}
end
if state ~= 'dead' and not (state == 'running' and ARGV[2] == '1') then
  return {state, {}, {}, {}}
end
if state == 'dead' and not redis.call('HGET', rk, 'settled') then
  return {'ending', {}, {}, {}}  -- a stop still on its way would cancel the steps sent again
end
local open = PREFIX .. 'open'
local waiting = PREFIX .. 'waiting'
if state == 'dead' then
  local is_open = {}
  for _, j in ipairs(redis.call('SMEMBERS', open)) do
    is_open[j] = true
  end
  local reopened = {}
  for i = 0, (tonumber(f[2]) or 0) - 1 do
    local j = tostring(i)
    if not is_open[j] and redis.call('HEXISTS', rk, 'result:' .. j) == 0 then
      reopened[#reopened + 1] = j
      is_open[j] = true
    end
  end
  in_chunks('SADD', open, reopened)
  redis.call('DEL', waiting)
  local waits = {}
  for j in pairs(is_open) do
    local wk = PREFIX .. 'wait:' .. j
    redis.call('DEL', wk)
    local before = {}
    for _, i in ipairs(split(redis.call('HGET', rk, 'after:' .. j))) do
      if is_open[i] then
        before[#before + 1] = i
      end
    end
    if #before > 0 then
      in_chunks('SADD', wk, before)
      waits[#waits + 1] = j
    end
  end
  in_chunks('SADD', waiting, waits)
  redis.call('HDEL', rk, 'finished_at', 'error', 'failed_step', 'settled')
  local fields = {'state', 'running'}
  redis.call('HSET', rk, unpack(fields))
  redis.call('DEL', PREFIX .. 'done')
  for _, key in ipairs({rk, open, waiting}) do
    redis.call('PERSIST', key)
  end
end
local ready, replan = {}, {}
for _, j in ipairs(redis.call('SDIFF', open, waiting)) do
  ready[#ready + 1] = launch_entry(rk, j)
  replan[#replan + 1] = j
  replan[#replan + 1] = redis.call('HGET', rk, 'queue:' .. j) or ''
end
local on_failure = {}
if f[3] then
  on_failure = {f[3], redis.call('HGET', rk, 'queue:' .. f[3]) or ''}
end
return {state, ready, replan, on_failure}

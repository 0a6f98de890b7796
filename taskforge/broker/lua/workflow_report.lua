-- workflow_report: a step reached its final state; count it, and say what may go next.
-- KEYS[1] record          the workflow's record (routes the call to the workflow's slot)
-- ARGV[1] prefix          the workflow's key prefix
-- ARGV[2] step            the step's index
-- ARGV[3] state           its final state: succeeded, dead or cancelled
-- ARGV[4] result          msgpack, when it succeeded
-- ARGV[5] error           why it ended, when it did not
-- ARGV[6] retention_ms    how long the workflow's keys stay once it ended
-- Returns {state of the workflow ('gone': no such record), ready, cancel, settle}:
--   ready: per step the client must send now, {index, spec, results of its inputs...};
--   cancel: pairs of index, queue: steps to cancel (the workflow ended);
--   settle: 1 when the workflow ended and the client, once it sent and cancelled
--   those, must say so (workflow_settle).
-- Counted by step, never by arrival: only the first report of a step removes
-- it from `open`, so a duplicate run or a re-sent report changes nothing.
-- Yet every report answers with what may go next, so a re-delivery after a
-- crash sends again what the first delivery may not have (the steps' ids are
-- fixed, and enqueue stores an id once).
local rk = KEYS[1]
local i, outcome = ARGV[2], ARGV[3]
local f = redis.call('HMGET', rk, 'state', 'next:' .. i)
local state = f[1]
if not state then
  return {'gone', {}, {}, 0}
end
local ttl = tonumber(ARGV[6])
local open = PREFIX .. 'open'
local first = redis.call('SREM', open, i) == 1
if state == 'running' and outcome == 'succeeded' then
  if first then
    redis.call('HSET', rk, 'result:' .. i, ARGV[4])
  end
  local ready = {}
  for _, j in ipairs(split(f[2])) do
    local wk = PREFIX .. 'wait:' .. j
    local free
    if first then  -- j cannot have reported: it never ran while i was open
      redis.call('SREM', wk, i)
      free = redis.call('SCARD', wk) == 0
    else  -- a re-delivery: j may go if it is free and has not reported
      free = redis.call('EXISTS', wk) == 0 and redis.call('SISMEMBER', open, j) == 1
    end
    if free then
      redis.call('SREM', PREFIX .. 'waiting', j)
      ready[#ready + 1] = launch_entry(rk, j)
    end
  end
  if first and not f[2] and redis.call('SCARD', open) == 0 then
    -- Nothing to stop or send on success: settled here, so the client only lists it.
    end_workflow(rk, 'succeeded', ttl, {'settled', '1'})
    return {'succeeded', ready, {}, 1}
  end
  return {state, ready, {}, 0}
end
if state ~= 'running' and outcome == 'succeeded'
    and (first or (redis.call('HEXISTS', rk, 'result:' .. i) == 0 and redis.call('HGET', rk, 'on_failure') ~= i)) then
  -- A step that succeeded after its workflow ended: a group member still
  -- running then (first), or a dead step retried without its workflow being
  -- resumed (a process that died in between).  Its result is kept, so a
  -- resumed workflow (workflow_resume) counts it as succeeded.
  redis.call('HSET', rk, 'result:' .. i, ARGV[4])
end
if state == 'running' then
  if not first then
    return {state, {}, {}, 0}
  end
  local why = {'error', ARGV[5], 'failed_step', i}
  if outcome == 'cancelled' then  -- a step cancelled by hand: the workflow cannot go on
    state = 'cancelled'
    end_workflow(rk, 'cancelled', ttl, why)
  else
    state = 'dead'
    end_workflow(rk, 'dead', ttl, why)
  end
end
local ready, cancel, settle = ending(rk, state)
return {state, ready, cancel, settle}

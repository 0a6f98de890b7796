-- Workflows: the helpers of the workflow_*.lua scripts, which read and end
-- a workflow's record in its own slot.

-- Workflows.  A workflow's keys share the hash tag {wf:<id>} (ARGV[1] is its
-- prefix), so its scripts are single-slot wherever its steps' queues live.
-- The record holds, besides state and times: spec:<i> (msgpack, read only
-- by the client), queue:<i>, next:<i> (the steps that wait for step i),
-- input:<i> (the steps whose results step i receives), result:<i>.  Sets:
-- open (steps not yet reported), waiting (steps not yet free to go: some
-- step before them has not succeeded), wait:<j> (the steps j still waits
-- for).  The steps in flight (maybe stored, not reported) are open minus
-- waiting: one SDIFF when a workflow ends, no bookkeeping per step.

-- Record fields hold long lists (a 10,000-member group); unpack has a limit.
local CHUNK = 1000

local function split(list)
  local out = {}
  for v in string.gmatch(list or '', '[^,]+') do
    out[#out + 1] = v
  end
  return out
end

local function in_chunks(command, key, values)
  for i = 1, #values, CHUNK do
    redis.call(command, key, unpack(values, i, math.min(i + CHUNK - 1, #values)))
  end
end

-- What the client needs to send step j: its index, its spec, then the result
-- of every step listed in its input field, in that order.
-- A step with more inputs than INLINE_INPUTS (a chord's body of 100,000
-- members) gets their count instead, {j, spec, n}: the client reads the
-- results in slices of its own (delivery.py, `with_inputs`), so that no
-- call holds Redis for all of them. They cannot change meanwhile: a result
-- is written once, by its step's first report, before the step can go.
local INLINE_INPUTS = 2000
local function launch_entry(rk, j, inline)
  local f = redis.call('HMGET', rk, 'spec:' .. j, 'input:' .. j)
  local entry = {j, f[1] or ''}
  local inputs = split(f[2])
  if #inputs > INLINE_INPUTS and not inline then
    entry[3] = #inputs
    return entry
  end
  for i = 1, #inputs, CHUNK do
    local fields = {}
    for k = i, math.min(i + CHUNK - 1, #inputs) do
      fields[#fields + 1] = 'result:' .. inputs[k]
    end
    for _, v in ipairs(redis.call('HMGET', rk, unpack(fields))) do
      entry[#entry + 1] = v or ''
    end
  end
  return entry
end

-- A workflow that ended: its steps that may be stored and never reported
-- (to cancel), its on_failure step when it died, and 1: the client must settle
-- it once it did both (workflow_settle); nothing after that.
local function ending(rk, state)
  if redis.call('HGET', rk, 'settled') then
    return {}, {}, 0
  end
  local ready, cancel = {}, {}
  local k = redis.call('HGET', rk, 'on_failure')
  if state == 'dead' and k then
    -- Then the failed step's index, queue and error: an on_failure step built
    -- with .s() receives its summary (the client reads the rest in its record).
    local entry = launch_entry(rk, k, true)  -- the failed step's summary follows its inputs
    local failed = redis.call('HMGET', rk, 'failed_step', 'error')
    entry[#entry + 1] = failed[1] or ''
    entry[#entry + 1] = failed[1] and redis.call('HGET', rk, 'queue:' .. failed[1]) or ''
    entry[#entry + 1] = failed[2] or ''
    ready[1] = entry
  end
  for _, j in ipairs(redis.call('SDIFF', PREFIX .. 'open', PREFIX .. 'waiting')) do
    cancel[#cancel + 1] = j
    cancel[#cancel + 1] = redis.call('HGET', rk, 'queue:' .. j) or ''
  end
  return ready, cancel, 1
end

-- Move a running workflow to its final state, wake whoever waits on it, and
-- let its keys expire after the retention (an open workflow never expires).
local function end_workflow(rk, state, ttl, extra)
  local fields = {'state', state, 'finished_at', now_ms()}
  for _, v in ipairs(extra or {}) do
    fields[#fields + 1] = v
  end
  redis.call('HSET', rk, unpack(fields))
  local waits = {}
  for _, j in ipairs(redis.call('SMEMBERS', PREFIX .. 'open')) do
    waits[#waits + 1] = PREFIX .. 'wait:' .. j
  end
  if #waits > 0 then
    for i = 1, #waits, CHUNK do
      redis.call('DEL', unpack(waits, i, math.min(i + CHUNK - 1, #waits)))
    end
  end
  local done = PREFIX .. 'done'
  redis.call('RPUSH', done, '1')
  for _, key in ipairs({rk, PREFIX .. 'open', PREFIX .. 'waiting', done}) do
    redis.call('PEXPIRE', key, ttl)
  end
end

-- workflow_flight: every step that may be sent now, for a sender that may have died.
-- KEYS[1] record          the workflow's record (routes the call to the workflow's slot)
-- ARGV[1] prefix          the workflow's key prefix
-- Returns {state ('gone': no such record), ready} with ready as workflow_report
-- answers it: the steps free to go that have not reported.  Sending them
-- again is harmless (fixed ids), so the reconciler calls this for a workflow
-- whose producer never said its first steps were stored.
local rk = KEYS[1]
local state = redis.call('HGET', rk, 'state')
if not state then
  return {'gone', {}}
end
local ready = {}
if state == 'running' then
  for _, j in ipairs(redis.call('SDIFF', PREFIX .. 'open', PREFIX .. 'waiting')) do
    ready[#ready + 1] = launch_entry(rk, j)
  end
end
return {state, ready}

-- workflow_flight: every step that may be sent now, for a sender that may have died.
-- KEYS[1] record          the workflow's record (routes the call to the workflow's slot)
-- ARGV[1] prefix          the workflow's key prefix
-- ARGV[2] cursor          where this slice starts ('0': the first), as SSCAN counts
-- ARGV[3] count           about how many open steps this slice looks at
-- Returns {state ('gone': no such record), ready, next cursor ('0': the
-- last slice)} with ready as workflow_report answers it: the steps free to
-- go that have not reported.  Sending them again is harmless (fixed ids), so
-- the reconciler calls this for a workflow whose producer never said its
-- first steps were stored.  A slice at a time: the open steps of a group of
-- 100,000 in one call held Redis for a long while.
local rk = KEYS[1]
local state = redis.call('HGET', rk, 'state')
if not state then
  return {'gone', {}, '0'}
end
local ready = {}
local cursor = '0'
if state == 'running' then
  local found = redis.call('SSCAN', PREFIX .. 'open', ARGV[2], 'COUNT', tonumber(ARGV[3]))
  cursor = found[1]
  for _, j in ipairs(found[2]) do
    if redis.call('SISMEMBER', PREFIX .. 'waiting', j) == 0 then
      ready[#ready + 1] = launch_entry(rk, j)
    end
  end
end
return {state, ready, cursor}

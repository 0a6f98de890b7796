-- workflow_settle: the steps of an ended workflow were cancelled, its on_failure sent.
-- KEYS[1] record          the workflow's record (routes the call to the workflow's slot)
-- ARGV[1] prefix          the workflow's key prefix
-- Later reports of running members (a group's members finish) then answer
-- with nothing more to do.  Returns 1, or 0 for a workflow still running.
local rk = KEYS[1]
local state = redis.call('HGET', rk, 'state')
if not state or state == 'running' then
  return 0
end
redis.call('HSET', rk, 'settled', '1')
return 1

-- workflow_cancel: WorkflowHandle.cancel(): a running workflow ends cancelled.
-- KEYS[1] record          the workflow's record (routes the call to the workflow's slot)
-- ARGV[1] prefix          the workflow's key prefix
-- ARGV[2] retention_ms
-- Returns {1 if it was running (else 0, or -1: no such workflow), cancel, settle},
-- as workflow_report answers them (the client stops those steps, then settles
-- the workflow).
local rk = KEYS[1]
local state = redis.call('HGET', rk, 'state')
if not state then
  return {-1, {}, 0}
end
local was = 0
if state == 'running' then
  was = 1
  state = 'cancelled'
  end_workflow(rk, 'cancelled', tonumber(ARGV[2]), {'error', 'Cancelled: WorkflowHandle.cancel()'})
end
local _, cancel, settle = ending(rk, state)
return {was, cancel, settle}

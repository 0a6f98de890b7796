-- cancel_steps: steps of a workflow that ended will never run.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] workflow        the workflow's id, written into the records this stores
-- ARGV[3] retention_ms
-- ARGV[4..] job_ids       the steps' ids, all on this queue
-- A step not started is cancelled; a running or finished one is left alone
-- (running group members finish).  A step not stored yet gets a cancelled
-- record in its place: a worker that read the workflow before it ended may
-- still send that step, and enqueue leaves a stored id alone, so it is never
-- stored and never runs.  The workflow has ended already: the steps cancelled
-- here leave no report in the outbox.
-- Returns how many steps this call stopped.
local ttl = tonumber(ARGV[3])
local now = now_ms()
local stopped = 0
local outbox = PREFIX .. 'outbox'
for i = 4, #ARGV do
  local id = ARGV[i]
  local jk = job_key(id)
  local state = redis.pcall('HGET', jk, 'state')
  if state == false then
    redis.call('HSET', jk, 'id', id, 'state', 'cancelled', 'workflow', ARGV[2], 'created_at', now,
      'finished_at', now, 'token', '')
    redis.call('PEXPIRE', jk, ttl)
    stopped = stopped + 1
  elseif type(state) == 'string' and cancel_unstarted(id, jk, state, ttl) == 1 then
    redis.call('HDEL', outbox, id)
    stopped = stopped + 1
  end
end
return stopped

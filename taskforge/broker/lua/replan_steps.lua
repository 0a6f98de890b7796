-- replan_steps: the steps of a resumed workflow on this queue may go again.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] workflow        the workflow's id: only records of its own steps are touched
-- ARGV[3] on_failure      '' or the id of its on_failure step, when on this queue
-- ARGV[4] phase           'drop': the records its death left; 'revive': its dead steps
-- ARGV[5..] job_ids       its steps free to go (workflow_resume's replan), on this queue
-- The client runs 'drop' on every queue and sends the steps free to go before it
-- runs 'revive' anywhere: a revived step that dies again at once then finds every
-- step its death must stop already stored, so none is sent after that stop.
-- A dead step goes back to pending with a fresh set of attempts, as retry_dead
-- moves it (revive_dead).  A step its workflow's death cancelled (cancel_steps:
-- a cancelled record with no report in the outbox) is dropped, so the client's send, which
-- follows, stores it again; a step a hand cancelled still has its report in the
-- outbox and is left alone, as is every record not dead or cancelled (a running
-- group member finishes and reports).  A finished on_failure step is dropped,
-- so that a second death sends it again.  Returns the ids moved back to pending.
local workflow = ARGV[2]
local moved = {}
local outbox = PREFIX .. 'outbox'
local function drop(id, jk)
  redis.call('ZREM', DEAD, id)
  redis.call('HDEL', outbox, id)
  index_drop(jk, id)
  redis.call('DEL', jk, PREFIX .. 'done:' .. id, stream_key(id))
end
local revive = ARGV[4] == 'revive'
if ARGV[3] ~= '' and not revive then
  local jk = job_key(ARGV[3])
  local f = redis.pcall('HMGET', jk, 'state', 'workflow')
  if type(f) == 'table' and f[2] == workflow and (f[1] == 'succeeded' or f[1] == 'dead' or f[1] == 'cancelled') then
    drop(ARGV[3], jk)
  end
end
if #ARGV > 4 then
  need_zsets(PENDING, DEAD)
  need_seq()
  need_limits()
end
for i = 5, #ARGV do
  local id = ARGV[i]
  local jk = job_key(id)
  local f = redis.pcall('HMGET', jk, 'state', 'workflow')
  if type(f) == 'table' and f[2] == workflow then
    if f[1] == 'dead' and revive then
      redis.call('ZREM', DEAD, id)
      redis.call('HDEL', outbox, id)  -- its death was counted; it reports again when it ends
      revive_dead(id, jk)
      moved[#moved + 1] = id
    elseif f[1] == 'cancelled' and not revive and redis.call('HEXISTS', outbox, id) == 0 then
      drop(id, jk)
    end
  end
end
if #moved > 0 then
  wake(#moved)
end
return moved

-- dep_report: a job this deferred job depends on has ended.  Once every one has succeeded
-- (or ended at all, with allow_failure) it goes to pending; one that did not succeed,
-- without allow_failure, ends it cancelled.  Idempotent: a parent counts once however
-- often its end is reported, so the job runs at most once.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id          the deferred job
-- ARGV[3] parent          the id of the job that ended
-- ARGV[4] state           how it ended: succeeded, dead or cancelled
-- ARGV[5] retention_ms
-- Returns the job's state after the report ('' when there is no such job).
local id = ARGV[2]
local jk = job_key(id)
if not is_job(jk) then
  return ''
end
local f = redis.call('HMGET', jk, 'state', 'parents', 'allow_failure')
if f[1] ~= 'deferred' then
  return f[1] or ''
end
local met = PREFIX .. 'met:' .. id
if ARGV[4] ~= 'succeeded' and f[3] ~= '1' then
  redis.call('ZREM', PREFIX .. 'deferred', id)
  redis.call('DEL', met)
  finish(id, jk, 'cancelled', now_ms(), tonumber(ARGV[5]),
    {'error', 'a job it depends on ended ' .. ARGV[4] .. ': ' .. ARGV[3]})
  return 'cancelled'
end
redis.call('SADD', met, ARGV[3])
local n = 0
for _ in string.gmatch(f[2] or '', '[^\n]+') do
  n = n + 1
end
if redis.call('SCARD', met) < n then
  return 'deferred'
end
redis.call('ZREM', PREFIX .. 'deferred', id)
redis.call('DEL', met)
make_pending(id, jk)
wake(1)
return 'pending'

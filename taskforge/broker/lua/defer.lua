-- defer: hold a job stored a moment ago as `deferred` until the jobs it depends on have ended
-- (depends_on).  It was stored scheduled far ahead with its `parents` and `allow_failure`
-- fields, so it cannot start meanwhile, and a reconciler finds it should its producer die here.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- Returns 1 (held now, or already), 0 (no such job, or neither parked nor deferred: left alone).
local id = ARGV[2]
local jk = job_key(id)
if not is_job(jk) then
  return 0
end
local f = redis.call('HMGET', jk, 'state', 'parents')
if f[1] == 'deferred' then
  return 1
end
if f[1] ~= 'scheduled' or not f[2] then
  return 0
end
redis.call('ZREM', SCHEDULED, id)
redis.call('HSET', jk, 'state', 'deferred')
redis.call('ZADD', PREFIX .. 'deferred', now_ms(), id)
return 1

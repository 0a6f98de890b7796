-- defer: hold a job stored a moment ago as `deferred` until the jobs it depends on have ended
-- (depends_on).  It was stored scheduled far ahead, so it cannot start meanwhile.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] parents         the jobs it waits for, one "queue<TAB>id" per line
-- ARGV[4] allow_failure   '1': it runs even when one of them ends dead or cancelled
-- Returns 1 (held), 0 (no such job, or not scheduled: left alone).
local id = ARGV[2]
local jk = job_key(id)
if not is_job(jk) or redis.call('HGET', jk, 'state') ~= 'scheduled' then
  return 0
end
redis.call('ZREM', SCHEDULED, id)
redis.call('HSET', jk, 'state', 'deferred', 'parents', ARGV[3], 'allow_failure', ARGV[4])
redis.call('ZADD', PREFIX .. 'deferred', now_ms(), id)
return 1

-- sleep_job: a running job reached a durable sleep for the first time: the run
-- ends, and the job waits as a scheduled job until `due`, without using an attempt.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] token           the claim token
-- ARGV[4] index           which sleep of the run (1 for the first), kept as "slept:<index>"
-- ARGV[5] due_ms          when to run again, ms since the epoch (0: delay_ms from now, on Redis's clock)
-- ARGV[6] delay_ms
-- Returns the due time in ms, or -1 when the claim is no longer ours (fenced,
-- nothing written).  A later run of the job finds the sleep's field and goes
-- on at once; its steps stay, as they are fields of the same record.
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
local ours, f = claim_guard(jk, token, 'group', 'lane')
if not ours then
  return -1
end
need_zsets(SCHEDULED)
local due = tonumber(ARGV[5])
if due <= 0 then
  due = now_ms() + tonumber(ARGV[6])
end
redis.call('HINCRBY', jk, 'attempts', -1)  -- first: a junk count fails here, before any write
leave_running(id, jk, f[3], f[4])
redis.call('HSET', jk, 'state', 'scheduled', 'token', '', 'scheduled_at', due, 'slept:' .. ARGV[4], due)
redis.call('ZADD', SCHEDULED, due, id)
return due

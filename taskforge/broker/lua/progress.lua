-- progress: a running task reports how far it got.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] token           the claim token
-- ARGV[4] fraction        0..1
-- ARGV[5] message         ('' = none)
-- ARGV[6] meta            msgpack of set_progress's meta ('' = none)
-- Returns 1, or 0 when the claim is no longer ours (fenced, nothing written).
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
if not claim_guard(jk, token) then
  return 0
end
redis.call('HSET', jk, 'progress', ARGV[4], 'progress_message', ARGV[5], 'progress_meta', ARGV[6])
return 1

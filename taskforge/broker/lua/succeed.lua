-- succeed: record a result and release the claim.
-- ARGV[2] id   ARGV[3] claim token   ARGV[4] result (msgpack)   ARGV[5] retention_ms
-- Returns 1, or 0 when the claim is no longer ours (the lease expired and the
-- job was reclaimed): fencing, so a late worker never overwrites the outcome
-- of the attempt that replaced it.
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
if redis.call('HGET', jk, 'token') ~= token or redis.call('HGET', jk, 'state') ~= 'running' then
  return 0
end
release_claim(token)
redis.call('ZREM', RUNNING, id)
redis.call('HSET', jk, 'result', ARGV[4])
finish(id, jk, 'succeeded', now_ms(), tonumber(ARGV[5]))
return 1

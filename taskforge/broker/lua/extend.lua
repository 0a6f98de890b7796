-- extend: renew the leases of jobs still running (the supervisor's heartbeat).
-- ARGV[2] lease_ms   then pairs: id, claim token
-- Returns the ids whose claim is no longer ours (reclaimed, cancelled, finished),
-- so the supervisor can stop caring about them.
local deadline = now_ms() + tonumber(ARGV[2])
local lost = {}
for i = 3, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local jk = job_key(id)
  if redis.call('HGET', jk, 'token') == token and redis.call('HGET', jk, 'state') == 'running' then
    redis.call('ZADD', RUNNING, 'XX', deadline, id)
  else
    lost[#lost + 1] = id
  end
end
return lost

-- extend: renew the leases of jobs still running (the supervisor's heartbeat).
-- ARGV[2] lease_ms   then pairs: id, claim token
-- Returns the ids whose claim another worker now holds (the lease expired and
-- the job was reclaimed), so the supervisor can say so.
local deadline = now_ms() + tonumber(ARGV[2])
local lost = {}
for i = 3, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local jk = job_key(id)
  local state = redis.call('HGET', jk, 'state')
  if redis.call('HGET', jk, 'token') == token and state == 'running' then
    redis.call('ZADD', RUNNING, 'XX', deadline, id)
  elseif state ~= 'succeeded' and state ~= 'dead' and state ~= 'cancelled' then
    -- Finished is the ordinary race with a child that just recorded its job;
    -- anything else means another worker took it over.
    lost[#lost + 1] = id
  end
end
return lost

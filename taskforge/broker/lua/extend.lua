-- extend: renew the leases of jobs still running (the supervisor's heartbeat).
-- ARGV[2] lease_ms   then pairs: id, claim token
-- Returns {ids whose claim another worker now holds (the lease expired and the
-- job was reclaimed)..., '|', ids someone asked to abort...}: the supervisor
-- kills the children running the latter.
local deadline = now_ms() + tonumber(ARGV[2])
local lost, aborted = {}, {}
for i = 3, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local jk = job_key(id)
  local state = redis.call('HGET', jk, 'state')
  if redis.call('HGET', jk, 'token') == token and state == 'running' then
    redis.call('ZADD', RUNNING, 'XX', deadline, id)
    if redis.call('HGET', jk, 'abort') then
      aborted[#aborted + 1] = id
    end
  elseif state ~= 'succeeded' and state ~= 'dead' and state ~= 'cancelled' then
    -- Finished is the ordinary race with a child that just recorded its job;
    -- anything else means another worker took it over.
    lost[#lost + 1] = id
  end
end
lost[#lost + 1] = '|'
for _, id in ipairs(aborted) do
  lost[#lost + 1] = id
end
return lost

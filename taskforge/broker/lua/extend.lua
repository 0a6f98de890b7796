-- extend: renew the leases of jobs still running (the supervisor's heartbeat).
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] lease_ms
-- ARGV[3..] claims        pairs: job id, claim token
-- Returns {ids whose claim another worker now holds (the lease expired and the
-- job was reclaimed)..., '|', ids someone asked to abort...}: the supervisor
-- kills the children running the latter.
local deadline = now_ms() + tonumber(ARGV[2])
local lost, aborted = {}, {}
for i = 3, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local ours, f = claim_guard(job_key(id), token, 'abort')
  local state = f and f[2]
  if ours then
    redis.call('ZADD', RUNNING, 'XX', deadline, id)
    if f[3] then
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

-- queue_probe: is any job in the queue, and what do its stats say of the last minutes (reads only).
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] minute          Redis's current minute (seconds // 60), the one stats keys are named by
-- ARGV[3] minutes         how many minutes back to look, the current one included
-- Returns {jobs, active, expired}: jobs 1 when a key that keeps or counts jobs exists (pending,
-- scheduled, running, dead, lane counts, limits, held heads, deferred); active 1 when a stats key of those
-- minutes exists; expired, the sum of their `expired` fields (junk counts as 0).
-- `taskforge status` and the dashboard call it for every queue in one pipeline, and read in full
-- only the queues with jobs: 5,000 one-off queues cost 5,000 short calls, not 50,000 round trips.
-- Key names spelled here, not through the definitions of lib/: they would bring their helpers along,
-- and this script runs once per queue of a status page (the lane counts' name is cut in two, as
-- scripts.py would read the whole word for the helper of that name).
local jobs = redis.call('EXISTS', PENDING, SCHEDULED, RUNNING, DEAD, PREFIX .. 'lane_' .. 'jobs', PREFIX .. 'limits',
  PREFIX .. 'held_head', PREFIX .. 'deferred')
local last, keys = tonumber(ARGV[2]), {}
for minute = last - tonumber(ARGV[3]) + 1, last do
  keys[#keys + 1] = PREFIX .. 'stats:' .. minute
end
-- One EXISTS over the window: an idle queue (the common case) costs two calls in all.
local active, expired = redis.call('EXISTS', (unpack or table.unpack)(keys)), 0
local function add(key)
  local ok, n = pcall(redis.call, 'HGET', key, 'expired')
  n = ok and tonumber(n) or 0
  if n and n > 0 then
    expired = expired + n
  end
end
-- The few minutes with stats, found by halving the window (a queue used once: about a dozen
-- EXISTS, not 60 reads); a busy window is read minute by minute.
local function within(lo, hi)
  if redis.call('EXISTS', (unpack or table.unpack)(keys, lo, hi)) == 0 then
    return
  end
  if lo == hi then
    return add(keys[lo])
  end
  local mid = math.floor((lo + hi) / 2)
  within(lo, mid)
  within(mid + 1, hi)
end
if active > 0 and active * 12 < #keys then
  within(1, #keys)
elseif active > 0 then
  for _, key in ipairs(keys) do
    add(key)
  end
end
return {jobs > 0 and 1 or 0, active > 0 and 1 or 0, expired}

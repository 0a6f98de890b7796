-- retry_dead: move dead jobs back to pending with a fresh set of attempts (and of worker losses).
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] limit           (used when no ids are given: the oldest dead jobs)
-- ARGV[3..] job_ids
-- Returns the ids moved.  A dead job is unfinished again, so its record stops expiring.
local ids = {}
for i = 3, #ARGV do
  ids[#ids + 1] = ARGV[i]
end
if #ids == 0 then
  ids = redis.call('ZRANGE', DEAD, 0, tonumber(ARGV[2]) - 1)
end
local moved = {}
if #ids > 0 then
  need_zsets(PENDING)
  need_seq()
  need_limits()
end
for _, id in ipairs(ids) do
  local jk = job_key(id)
  if redis.call('ZREM', DEAD, id) == 1 and is_job(jk) then
    revive_dead(id, jk)
    moved[#moved + 1] = id
  end
end
if #moved > 0 then
  wake(#moved)
end
return moved

-- enqueue: store new jobs, ready or scheduled, all or none.
-- ARGV[2] max_size (0 = unbounded)   ARGV[3] number of jobs n
-- then n groups of 9: id, task, payload, priority, max_attempts, timeout_ms,
--   due_ms ('' = none; an absolute time chosen by the producer),
--   delay_ms (relative, resolved against the server clock here),
--   inherit ('1': sent by name, the worker's task definition supplies
--   max_attempts and timeout; '' otherwise)
-- Returns {'OK', n} or {'FULL', size}.
-- The max_size check and the inserts run in one script, so concurrent
-- producers can never overshoot the bound between a check and a write.
local FIELDS = 9
local max_size = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
if max_size > 0 then
  local size = redis.call('ZCARD', PENDING) + redis.call('ZCARD', SCHEDULED) + redis.call('ZCARD', RUNNING)
  if size + n > max_size then
    return {'FULL', size}
  end
end
local now = now_ms()
for i = 0, n - 1 do
  local base = 4 + i * FIELDS
  local id = ARGV[base]
  local jk = job_key(id)
  -- A client that lost the reply re-sends this script with the same ids:
  -- jobs already stored are left alone, so a retry never resets a job that
  -- has since run, or revives one that finished.
  if redis.call('EXISTS', jk) == 0 then
  local due = 0
  if ARGV[base + 6] ~= '' then
    due = tonumber(ARGV[base + 6])
  elseif tonumber(ARGV[base + 7]) > 0 then
    due = now + tonumber(ARGV[base + 7])
  end
  redis.call('HSET', jk, 'id', id, 'task', ARGV[base + 1], 'payload', ARGV[base + 2],
    'priority', ARGV[base + 3], 'max_attempts', ARGV[base + 4], 'timeout', ARGV[base + 5],
    'attempts', 0, 'created_at', now)
  if ARGV[base + 8] == '1' then
    redis.call('HSET', jk, 'inherit', '1')
  end
  if due > now then
    redis.call('HSET', jk, 'state', 'scheduled', 'scheduled_at', due)
    redis.call('ZADD', SCHEDULED, due, id)
  else
    make_pending(id, jk)
  end
  end
end
wake(n)
return {'OK', n}

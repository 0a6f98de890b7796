-- Promotion: scheduled and retrying jobs made pending once due; a job past
-- its `expires` time ends instead, and never runs.

-- Whether a job's `expires` field (ms; nil for none) has passed.  Junk counts
-- as no expiry: a job is never dropped on a field nobody can read.
local function is_expired(raw, now)
  local at = raw and tonumber(raw)
  return at ~= nil and at == at and at <= now
end

-- A job not started by its `expires` time ends cancelled, "expired", and never
-- runs; its record is kept for the `keep_ms` the producer stored beside it.
local function end_expired(id, jk, now)
  local keep = tonumber(redis.call('HGET', jk, 'keep_ms'))
  if not keep or keep ~= keep or keep <= 0 then
    keep = 86400000
  end
  finish(id, jk, 'cancelled', now, keep, {'failure', 'expired', 'error', 'expired',
    'error_type', 'taskforge.errors.Expired'})
  count_outcome('expired', now)
end

-- Move scheduled and retrying jobs whose time has come to pending, at most
-- `limit` per call so a million due jobs never stall Redis. Returns how many
-- ids had no job record left and were dropped.
local function promote_due(now, limit)
  local dropped = 0
  local due = redis.call('ZRANGEBYSCORE', SCHEDULED, '-inf', now, 'LIMIT', 0, limit)
  if #due > 0 then
    need_zsets(PENDING)
    need_seq()
  end
  for _, id in ipairs(due) do
    redis.call('ZREM', SCHEDULED, id)
    local jk = job_key(id)
    local expires = redis.pcall('HGET', jk, 'expires')
    if type(expires) == 'string' and is_expired(expires, now) then
      end_expired(id, jk, now)
    elseif redis.call('TYPE', jk)['ok'] == 'hash' then
      make_pending(id, jk)
    else
      dropped = dropped + 1
    end
  end
  return dropped
end

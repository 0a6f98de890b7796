-- The search index: the entries written with each job's record and final
-- state, and the sweeps that take away those of expired records.

-- The search index (app.find_jobs, `taskforge jobs`): one sorted set per
-- queue whose members all score 0, so it sorts by their bytes, and a range of
-- members sharing a prefix is one ZREVRANGEBYLEX.  Each member ends in the
-- job's *stamp*, its creation time (13 digits of ms) then its id (length-
-- prefixed), so every prefix lists its jobs newest first by creation, and one
-- stamp is a place in all of them at once (a page's cursor).  Per job:
--   't' <#task>:<task> <stamp>        every job, by task (all jobs: the tasks' lists merged)
--   'k' <#key>:<key> <stamp>          by key, for a job with one
--   'd' <stamp>, 'c' <stamp>          while it is dead, once it is cancelled
-- One entry for a plain job: each costs Redis about 170 bytes.  (Earlier
-- versions also wrote 'a' <name> for every job, <name> being the job's
-- stamp, then <#task>:<task><key>: the search reads none, and every drop
-- and sweep below takes them away with the job's other entries.)
-- A new job's entries go in with the record, in one ZADD; a death or a
-- cancel adds one more, a dead job retried loses its 'd'; a deleted job
-- loses them all.  A record that expires leaves its entries behind until the
-- sweep in reclaim finds it gone.  The index is a view, so its writes go
-- through pcall: damage there must never stop a transition.
local INDEX = PREFIX .. 'index'
local function index_stamp(created, id)
  return string.format('%013d', tonumber(created) or 0) .. #id .. ':' .. id
end

-- A job's entries, its stamp, and its name (stamp, task and key: every
-- entry of the job can be worked out from it, see entries_named).
local function index_entries(id, created, task, key)
  local stamp = index_stamp(created, id)
  local out = {'t' .. #task .. ':' .. task .. stamp}
  if key ~= '' then
    out[2] = 'k' .. #key .. ':' .. key .. stamp
  end
  return out, stamp, stamp .. #task .. ':' .. task .. key
end

-- Members into the index in one ZADD per 1,000 (unpack has a limit).
local function index_add(members)
  for first = 1, #members, 1000 do
    local args = {}
    for i = first, math.min(first + 999, #members) do
      args[#args + 1] = 0
      args[#args + 1] = members[i]
    end
    redis.pcall('ZADD', INDEX, unpack(args))
  end
end

-- A job's final-state entry ('d' dead, 'c' cancelled) in (`on`) or out.
local function index_mark(jk, id, letter, on)
  local created = redis.pcall('HGET', jk, 'created_at')
  if type(created) == 'string' then
    if on then
      redis.pcall('ZADD', INDEX, 0, letter .. index_stamp(created, id))
    else
      redis.pcall('ZREM', INDEX, letter .. index_stamp(created, id))
    end
  end
end

-- EXPIRING holds one member per finished record that will expire: its
-- name (stamp, task, key: every entry of the job can be worked out from it),
-- scored by when the record expires (ms).  The end of a job
-- adds it (and moves it, when a job ends again); a record that stops
-- expiring (a dead job retried) or is deleted loses it.  So the sweep takes the entries whose
-- record is due to go as one range from the bottom, in slices, and every
-- member it looks at is due: it keeps up with any rate jobs finish at.
local EXPIRING = PREFIX .. 'expiring'

-- A job about to be deleted: every entry it may have, and its EXPIRING member.
local function index_drop(jk, id)
  local f = redis.pcall('HMGET', jk, 'created_at', 'task', 'key')
  if type(f) == 'table' and type(f[1]) == 'string' then
    local members, stamp, name = index_entries(id, f[1], f[2] or '', f[3] or '')
    redis.pcall('ZREM', EXPIRING, name)
    members[#members + 1] = 'd' .. stamp
    members[#members + 1] = 'c' .. stamp
    members[#members + 1] = 'a' .. name  -- written by earlier versions
    redis.pcall('ZREM', INDEX, unpack(members))
  end
end

-- A finished record's EXPIRING member, at `at` (ms) or (nil) out: from the
-- fields created_at, task and key (nil or junk: a record with no entries).
local function index_expire(created, task, key, id, at)
  if type(created) ~= 'string' or type(task) ~= 'string' then
    return
  end
  local _, _, name = index_entries(id, created, task, type(key) == 'string' and key or '')
  if at then
    redis.pcall('ZADD', EXPIRING, at, name)
  else
    redis.pcall('ZREM', EXPIRING, name)
  end
end

-- Every entry of the job a name (`rest`: see index_entries) names, the 'a'
-- entry earlier versions wrote among them, and its id; nil for a member this
-- index never writes.
local function entries_named(rest)
  local colon = string.find(rest, ':', 14, true)
  local n = colon and tonumber(string.sub(rest, 14, colon - 1))
  local id = n and string.sub(rest, colon + 1, colon + n)
  if not id or id == '' then
    return nil
  end
  local stamp = string.sub(rest, 1, colon + n)
  local out = {'a' .. rest, 'd' .. stamp, 'c' .. stamp}
  local tail = string.sub(rest, colon + n + 1)
  local tcolon = string.find(tail, ':', 1, true)
  local tn = tcolon and tonumber(string.sub(tail, 1, tcolon - 1))
  if tn then
    local task, key = string.sub(tail, tcolon + 1, tcolon + tn), string.sub(tail, tcolon + tn + 1)
    out[#out + 1] = 't' .. #task .. ':' .. task .. stamp
    if key ~= '' then
      out[#out + 1] = 'k' .. #key .. ':' .. key .. stamp
    end
  end
  return out, id
end

-- Members out of a sorted set, 1,000 per ZREM (unpack has a limit).
local function zrem_all(key, members)
  for first = 1, #members, 1000 do
    redis.pcall('ZREM', key, unpack(members, first, math.min(first + 999, #members)))
  end
end

-- EXPIRING members one reclaim looks at (a sweep call: its caller's limit).
local SWEEP_SLICE = 200
-- One step of the sweep of the entries whose record expired: up to `limit`
-- members of EXPIRING due by `now`, from the bottom.  A job whose record is
-- gone loses every entry; one whose record is still there (it expires a
-- moment later than its score said) is scored again by its TTL, and one that
-- no longer expires (retried meanwhile) just leaves EXPIRING.  Returns how
-- many members it took, and whether more may be due (a full slice).
local function sweep_expiring(now, limit)
  local due = redis.pcall('ZRANGEBYSCORE', EXPIRING, '-inf', now, 'LIMIT', 0, limit)
  if type(due) ~= 'table' or due.err or #due == 0 then
    return 0, false
  end
  local gone, later = {}, {}
  for _, rest in ipairs(due) do
    local members, id = entries_named(rest)
    if id then
      local ttl = redis.call('PTTL', job_key(id))
      if ttl == -2 then
        for _, m in ipairs(members) do
          gone[#gone + 1] = m
        end
      elseif ttl > 0 then
        later[#later + 1] = now + ttl
        later[#later + 1] = rest
      end
    end
  end
  zrem_all(EXPIRING, due)
  zrem_all(INDEX, gone)
  for first = 1, #later, 1000 do
    redis.pcall('ZADD', EXPIRING, unpack(later, first, math.min(first + 999, #later)))
  end
  return #due, #due == limit
end

-- A member of any kind: the entries to take away with it once its job's
-- record is gone (an 'a' entry names them all; any other, itself: the sweep
-- meets the others on its way), its id, and its stamp; nil for a member
-- this index never writes.
local function member_named(member)
  local kind, rest = string.sub(member, 1, 1), string.sub(member, 2)
  if kind == 'a' then
    local members, id = entries_named(rest)
    return members, id, string.sub(rest, 1, 13)
  elseif kind == 't' or kind == 'k' then
    local colon = string.find(rest, ':', 1, true)
    local n = colon and tonumber(string.sub(rest, 1, colon - 1))
    rest = n and string.sub(rest, colon + n + 1) or ''
  elseif kind ~= 'd' and kind ~= 'c' then
    return nil
  end
  local colon = string.find(rest, ':', 14, true)
  local n = colon and tonumber(string.sub(rest, 14, colon - 1))
  local id = n and string.sub(rest, colon + 1)
  if not id or #id ~= n or n == 0 then
    return nil
  end
  return {member}, id, string.sub(rest, 1, 13)
end

-- The backstop sweep, for entries EXPIRING does not name (written before it
-- existed, or left by a record deleted some other way): up to SWEEP_INDEX
-- members, from the place kept in INDEX_AT on, round the whole index.  An
-- entry of a job created before `before` (ms) whose record is gone goes; the
-- entries of a job still there (one that waited or ran long, a dead one
-- kept longer) are looked at again when the sweep comes round.
local INDEX_AT = PREFIX .. 'index_at'
local SWEEP_INDEX = 100
local function sweep_index(before)
  local at = redis.pcall('GET', INDEX_AT)
  local low = type(at) == 'string' and ('(' .. at) or '-'
  local found = redis.pcall('ZRANGEBYLEX', INDEX, low, '+', 'LIMIT', 0, SWEEP_INDEX)
  if type(found) ~= 'table' or found.err then
    return
  end
  local bound = string.format('%013d', before)
  local gone = {}
  for _, member in ipairs(found) do
    local members, id, created = member_named(member)
    if not id then
      gone[#gone + 1] = member  -- not an entry this index writes
    elseif created < bound and redis.call('EXISTS', job_key(id)) == 0 then
      for _, m in ipairs(members) do
        gone[#gone + 1] = m
      end
    end
  end
  zrem_all(INDEX, gone)
  if #found < SWEEP_INDEX then
    redis.pcall('DEL', INDEX_AT)
  else
    redis.pcall('SET', INDEX_AT, found[#found])
  end
end

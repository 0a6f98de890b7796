-- enqueue_plain: store one plain job, ready or scheduled (what `.delay()` sends most).
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id          the job's id (its key; not stored)
-- ARGV[3] task            its task (stored; its index entry)
-- ARGV[4] priority        its place in line ('' = the default; stored, if given, among `fields`)
-- ARGV[5] due             '' = none; an absolute time chosen by the producer
-- ARGV[6] delay           relative, resolved against the server clock here
-- ARGV[7] payload         its msgpack payload
-- ARGV[8..] fields        pairs, field and value, stored as they are: the fields
--                         enqueue.lua stores unless '' (record.py ENQUEUE), then
--                         the job's plain fields (headers, retry filters)
-- Returns {'OK', id}, as enqueue.lua does for one job.
--
-- Why a script of its own: Redis runs a script's whole text on every call,
-- and enqueue.lua, which handles every feature (batches and slices, unique,
-- tick, debounce, keys and lanes, limits, max_size, re-sends), cost about
-- 10 us more per plain call than this one (benchmarks/job_memory.py).  The
-- producer (calls.enqueue) sends a job here only when none of those applies:
-- one job, not a re-send, no max_size, unique, tick, debounce, limits,
-- inherit (which may look up the task's limits), key, key limits or expiry.
-- What is stored is exactly what enqueue.lua stores for such a job (the same
-- record fields, pending score and seq, index entry and wake), so no reader
-- can tell the two apart (tests/broker/test_enqueue_plain.py compares them).
-- The producer leaves out the fields that are '' and decodes nothing here:
-- no JSON array to read, as enqueue.lua must for its many slots.
--
-- Damage: the first write that can fail comes first (the seq, then the
-- queue's set), so a broken fixed key stops the call with at most a spent
-- sequence number; the client names the damage (broker/damage.py).
local id, task = ARGV[2], ARGV[3]
local now = now_ms()
local due = 0
if ARGV[5] ~= '' then
  due = tonumber(ARGV[5])
elseif tonumber(ARGV[6]) > 0 then
  due = now + tonumber(ARGV[6])
end
local jk = job_key(id)
if due > now then
  redis.call('ZADD', SCHEDULED, due, id)
  redis.call('HSET', jk, 'payload', ARGV[7], 'created_at', now, 'task', task,
    'state', 'scheduled', 'scheduled_at', due, unpack(ARGV, 8, #ARGV))
else
  local seq = next_seq(1)
  if seq >= BAND - 1000000 then
    error('taskforge: ' .. SEQ .. ' is exhausted')
  end
  redis.call('ZADD', PENDING, pending_score(ARGV[4], seq), id)
  redis.call('HSET', jk, 'payload', ARGV[7], 'created_at', now, 'task', task,
    'state', 'pending', 'seq', seq, unpack(ARGV, 8, #ARGV))
end
redis.pcall('ZADD', INDEX, 0, index_entries(id, now, task, '')[1])  -- a keyless job has one entry
wake(1)
return {'OK', id}

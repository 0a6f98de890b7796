-- stream: a running job appends an item to its stream (current_job().stream).
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] token           the claim token
-- ARGV[4] item            msgpack of the value
-- Returns the item's entry id, or 0 when the claim is no longer ours (fenced,
-- nothing written): a run whose lease was lost must not add to the output of
-- the run that replaced it.  The stream is a Redis Stream under the job's
-- hash tag; the record counts its items (stream_length), and finishing the
-- job gives the stream the record's expiry (finish, in the shared helpers).
local id = ARGV[2]
local jk = job_key(id)
if not claim_guard(jk, ARGV[3]) then
  return 0
end
local entry = redis.pcall('XADD', stream_key(id), '*', 'v', ARGV[4])
if type(entry) == 'table' and entry.err then
  return redis.error_reply('CorruptJob: the stream of job ' .. id .. ' is not a stream (written by something else)')
end
redis.call('HINCRBY', jk, 'stream_length', 1)
return entry

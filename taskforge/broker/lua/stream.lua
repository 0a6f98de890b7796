-- stream: a running job appends an item to its stream (current_job().stream).
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] token           the claim token
-- ARGV[4] item            msgpack of the value
-- ARGV[5] index           the item's number in this run (1 for its first)
-- Returns the item's entry id, or 0 when the claim is no longer ours (fenced,
-- nothing written): a run whose lease was lost must not add to the output of
-- the run that replaced it.  The stream is a Redis Stream under the job's
-- hash tag; the record counts its items (stream_length), and finishing the
-- job gives the stream the record's expiry (finish, in the shared helpers).
-- The record also keeps which item was written last (stream_last: the token
-- and the index): a call sent again because its reply was lost (a reset, a
-- restart) finds its own item there and writes nothing more, so a reader
-- never sees it twice.  A run writes its items one at a time, so the last
-- one is the only one a repeat can be of.
local id = ARGV[2]
local jk = job_key(id)
local mark = ARGV[3] .. ':' .. ARGV[5]
local ours, f = claim_guard(jk, ARGV[3], 'stream_length', 'stream_last')
if not ours then
  return 0
end
if f[4] == mark then
  return 'written'
end
local entry = redis.pcall('XADD', stream_key(id), '*', 'v', ARGV[4])
if type(entry) == 'table' and entry.err then
  return redis.error_reply('CorruptJob: the stream of job ' .. id .. ' is not a stream (written by something else)')
end
redis.call('HSET', jk, 'stream_length', (tonumber(f[3]) or 0) + 1, 'stream_last', mark)
return entry

-- delete_jobs: remove finished jobs for good (`taskforge jobs --delete`).
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2..] job_ids
-- Returns how many were deleted.  Only a succeeded, dead or cancelled job
-- goes, with its stream, its done list and its search index entries; a job
-- in any other state now (a dead one retried meanwhile) is left alone, as
-- is a workflow step whose end its workflow has not heard of yet (its
-- report still in the outbox).  The client sends a slice at a time, so
-- Redis never blocks long, and a slice sent twice deletes nothing more.
local outbox = PREFIX .. 'outbox'
local deleted = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local jk = job_key(id)
  local state = redis.pcall('HGET', jk, 'state')
  if (state == 'succeeded' or state == 'dead' or state == 'cancelled') and redis.call('HEXISTS', outbox, id) == 0 then
    redis.call('ZREM', DEAD, id)
    index_drop(jk, id)
    redis.call('UNLINK', jk, PREFIX .. 'done:' .. id, stream_key(id))
    deleted = deleted + 1
  end
end
return deleted

-- succeed: record a result and release the claim; optionally claim the next job.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] job_id
-- ARGV[3] token           the claim token
-- ARGV[4] result          (msgpack)
-- ARGV[5] retention_ms
-- ARGV[6] retention_count (0: none; else at most that many finished records kept, trim_finished)
-- ARGV[7] next_token      (optional, with the next two: the token of a claim of the next job)
-- ARGV[8] lease_ms
-- ARGV[9] promote_limit
-- ARGV[10] promote        (the claim's flags, as dequeue.lua documents them)
-- ARGV[11] limited
-- ARGV[12] retry
-- Returns 1, or 0 when the claim is no longer ours (the lease expired and the
-- job was reclaimed): fencing, so a late worker never overwrites the outcome
-- of the attempt that replaced it. With a next token: {1 or 0, then what
-- dequeue returns}, so a busy worker pays one round trip per job, not two.
-- Successes are counted per minute by the client (broker/stats.py), not
-- here: a command fewer per job.
-- The claim runs whatever the fencing said: a retry of this call after a lost
-- reply is fenced (the job already succeeded) yet must get its claim back.
-- The record keeps the token whose report finished it (outcome_token): a
-- worker that lost this call's reply reads it back to tell its own success
-- from a takeover (worker/lost_acks.py).
-- A damaged queue (see need_zsets) fails the claim, not the success already
-- recorded: the claim then answers "nothing claimed, ask again now", and the
-- next dequeue reports the damage.
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
local ok = 0
local now = now_ms()
local ours, f = claim_guard(jk, token, 'group', 'unique', 'waiting', 'workflow', 'lane',
  'stream_length', 'created_at', 'task', 'key', 'dependents')
if ours then
  leave_running(id, jk, f[3], f[7])
  finish(id, jk, 'succeeded', now, tonumber(ARGV[5]), {'result', ARGV[4], 'outcome_token', token}, {f[4], f[5], f[6], f[8], f[9], f[10], f[11], f[12]})
  trim_finished(tonumber(ARGV[6]), 2)
  ok = 1
end
if not ARGV[7] or ARGV[7] == '' then
  return ok
end
local claimed, out = pcall(claim_ready, ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9]), 1, now,
  claim_opts(ARGV[10], ARGV[11], ARGV[12]))
if not claimed then
  if ok == 0 then
    error(out)
  end
  return {ok, 0, 0}
end
table.insert(out, 1, ok)
return out

-- succeed: record a result and release the claim; optionally claim the next job.
-- ARGV[2] id   ARGV[3] claim token   ARGV[4] result (msgpack)   ARGV[5] retention_ms
-- ARGV[6] next claim token ('' = claim nothing)   ARGV[7] lease_ms   ARGV[8] promote limit
-- Returns 1, or 0 when the claim is no longer ours (the lease expired and the
-- job was reclaimed): fencing, so a late worker never overwrites the outcome
-- of the attempt that replaced it. With a next token: {1 or 0, then what
-- dequeue returns}, so a busy worker pays one round trip per job, not two.
-- The claim runs whatever the fencing said: a retry of this call after a lost
-- reply is fenced (the job already succeeded) yet must get its claim back.
-- A damaged queue (see need_zsets) fails the claim, not the success already
-- recorded: the claim then answers "nothing claimed, ask again now", and the
-- next dequeue reports the damage.
local id, token = ARGV[2], ARGV[3]
local jk = job_key(id)
local ok = 0
local now = now_ms()
local f = redis.pcall('HMGET', jk, 'token', 'state', 'group', 'unique', 'waiting')
if type(f) == 'table' and f[1] == token and f[2] == 'running' then
  leave_running(id, jk, f[3])
  release_claim(token)
  finish(id, jk, 'succeeded', now, tonumber(ARGV[5]), {'result', ARGV[4]}, {f[4], f[5]})
  count_outcome('succeeded', now)
  ok = 1
end
if not ARGV[6] or ARGV[6] == '' then
  return ok
end
local claimed, out = pcall(claim_ready, ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8]), 1, now)
if not claimed then
  if ok == 0 then
    error(out)
  end
  return {ok, 0, 0}
end
table.insert(out, 1, ok)
return out

-- settle: record the results of several runs of one queue; optionally claim the next jobs.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] retention_ms
-- ARGV[3] retention_count (0: none; else at most that many finished records kept, trim_finished)
-- ARGV[4] next_token      ('' for no claim; else the token of a claim of up to `count` jobs)
-- ARGV[5] lease_ms
-- ARGV[6] promote_limit
-- ARGV[7] count
-- ARGV[8] promote         (the claim's flags, as dequeue.lua documents them)
-- ARGV[9] limited
-- ARGV[10] retry
-- ARGV[11..] results      triples: job id, claim token, result (msgpack); an
--                         empty result marks a job of a batch as started (no outcome yet)
-- Returns {oks, then what dequeue returns when a claim was asked}: oks is a
-- string of one '1' or '0' per result that is not a start mark, in order
-- ('0': the claim was no longer ours, nothing written: fencing, as succeed.lua).
-- A start mark clears the `unstarted` field the claim left on a job of a
-- batch after its first (fenced too: only under its claim's token), so a
-- reclaim charges its attempt if its worker dies (reclaim.lua).
-- What a worker's lane sends after a batch of runs: every success of the
-- batch and the next batch's claim, one round trip, one script (succeed.lua
-- is the same for one result). Each result is fenced on its own token.
local now = now_ms()
local oks, mine, fields = {}, {}, {}
for i = 11, #ARGV, 3 do
  local jk = job_key(ARGV[i])
  if ARGV[i + 2] == '' then
    if claim_guard(jk, ARGV[i + 1]) then
      redis.call('HDEL', jk, 'unstarted')
    end
  else
    local ours, f = claim_guard(jk, ARGV[i + 1], 'group', 'unique', 'waiting', 'workflow',
      'lane', 'stream_length', 'created_at', 'task', 'key', 'dependents')
    if ours then
      mine[#mine + 1] = i
      fields[#mine] = f
      oks[#oks + 1] = '1'
    else
      oks[#oks + 1] = '0'
    end
  end
end
-- Out of the running set together (one ZREM for the batch), then each recorded.
if #mine > 0 then
  local ids = {}
  for n, i in ipairs(mine) do
    ids[n] = ARGV[i]
  end
  redis.call('ZREM', RUNNING, unpack(ids))
end
for n, i in ipairs(mine) do
  local id, token, f = ARGV[i], ARGV[i + 1], fields[n]
  local jk = job_key(id)
  release_slot(id, jk, f[3], f[7])
  finish(id, jk, 'succeeded', now, tonumber(ARGV[2]), {'result', ARGV[i + 2], 'outcome_token', token},
    {f[4], f[5], f[6], f[8], f[9], f[10], f[11], f[12]})
end
if #mine > 0 then
  trim_finished(tonumber(ARGV[3]), 2 * #mine)
end
oks = table.concat(oks)
if ARGV[4] == '' then
  return {oks}
end
local claimed, out = pcall(claim_ready, ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), now,
  claim_opts(ARGV[8], ARGV[9], ARGV[10]))
if not claimed then
  if not string.find(oks, '1', 1, true) then
    error(out)
  end
  return {oks, 0, 0}
end
table.insert(out, 1, oks)
return out

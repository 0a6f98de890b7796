-- dequeue: promote due scheduled jobs, then claim up to `count` ready jobs.
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] token           the claim token (fresh per successful call; reused after an error)
-- ARGV[3] lease_ms
-- ARGV[4] promote_limit   at most this many due jobs promoted per call
-- ARGV[5] count
-- ARGV[6] promote         '1': promote due scheduled jobs first (else only when nothing is ready)
-- ARGV[7] limited         '1': the queue has limited tasks, look at their pending sets too
-- ARGV[8] retry           '1': a re-send after an error; hand back this token's jobs if its reply was lost
-- Returns {dropped, wait_ms, then per claimed job the values of a ClaimRow
--   (declared in broker/record.py): id, attempts (the attempt this claim
--   starts), damage ('', or 'state <value>' / 'attempts <value>': that field
--   of the record holds junk; the client dead-letters such a job instead of
--   running it), then the CLAIMED fields as they are ('' for none): task,
--   payload, max_attempts, timeout, priority, inherit, workflow, headers}
-- wait_ms: when nothing was claimed, ms until the next scheduled job is due
-- (-1: none), so an idle worker knows how long it may block.  When jobs were
-- claimed: 0 if more may be ready (the worker wakes a sibling lane to claim
-- too), -1 if nothing else is (no sibling woken for an empty claim).
-- Promotion is bounded per call so a million due jobs never stall Redis; the
-- claim is recorded in `running` in the same step as the pop, so a worker
-- dying between the two cannot lose the job.
local out = claim_ready(ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), nil,
  claim_opts(ARGV[6], ARGV[7], ARGV[8]))
-- More may be ready while the pending set, a keyed lane's turn or a limited
-- task exists (limited jobs wait in sets of their own: not looked into, so
-- "maybe").  One EXISTS, asked only of a claim that took jobs.
if #out > 2 then
  out[2] = redis.call('EXISTS', PENDING, TURNS, LIMITS) > 0 and 0 or -1
end
return out

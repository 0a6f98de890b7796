-- sweep: the search index entries of records that expired, one slice, and
-- finished records past the queue's retention_count (cancelled, or ended
-- before the count was lowered).
-- KEYS[1] pending         the queue's pending set (routes the call to the queue's slot)
-- ARGV[1] prefix          the queue's key prefix
-- ARGV[2] limit           how many EXPIRING members one call looks at
-- ARGV[3] retention_count (0: none; else finished records past it go too, up to `limit`)
-- Returns {how many members it took, 1 when more may be due (else 0)}.
-- reclaim runs one slice of the same sweep; a worker that finds a full slice
-- calls this again (broker/cleanup.py, within a budget per tick), so the
-- sweep keeps up however fast jobs finish, and each call stays short.
local taken, more = sweep_expiring(now_ms(), tonumber(ARGV[2]))
trim_finished(tonumber(ARGV[3]), tonumber(ARGV[2]))
return {taken, more and 1 or 0}

-- Turns: where an open lane's job (a keyed job of a task without limits)
-- stands in the main pending set, and the sweep of stale entries.

-- Keyed jobs of a task without limits (lanes "<band>:0:<key>") need no
-- lane and no head: they wait in PENDING itself, each at a *turn*, the
-- score's sequence part (start-time fair queueing).  A job without a key
-- takes the next sequence number, as ever; a key's job takes the turn after
-- its key's last waiting job or, for a key with none waiting, the turn at
-- the front of its band.  So one turn holds at most one job per key (equal
-- scores go by job id), a key's 100,000 jobs hold 100,000 turns one after
-- another, a new key's job waits behind at most one job per key, and the
-- claim of keyed jobs stays one ZPOPMIN.
-- KEY_TURNS: open lane -> the turn (a full score) of the last job the key
-- was given, one plain number.  A key with a job waiting has its entry at or
-- past the front of its band (its waiting jobs' turns are); an entry behind
-- the front is stale (none of its key's jobs waits) and counts as none, so
-- a claim or a cancel never has to touch the entries: the claim of keyed
-- jobs costs what a keyless claim does, however many keys there are.  Stale
-- entries go in the sweeps reclaim runs (each worker, every second or so:
-- at most SWEEP_COUNT entries looked at per sweep, from a cursor kept in
-- TURNS_AT), and all at once when a purge empties PENDING, so an idle key's
-- entry goes within seconds.  A claim moves SEQ up to the turns it took,
-- so no job sent later goes before a turn already served.  The entries only
-- place jobs in line: junk or a wrong type costs a job its turn, never the
-- job, so they go through pcall.
local KEY_TURNS = PREFIX .. 'key_turns'
local TURNS_AT = PREFIX .. 'key_turns_at'
local SWEEP_COUNT = 1000

local function is_open_lane(lane)
  local band = (string.byte(lane, 1) or 0) - 48
  return band >= 0 and band <= 3 and string.byte(lane, 2) == 58 and string.byte(lane, 3) == 48
    and string.byte(lane, 4) == 58
end

-- The lowest score waiting in band `band` of PENDING (nil: none).
local function band_head(band)
  local low = band * BAND
  local first = redis.pcall('ZRANGEBYSCORE', PENDING, low, '(' .. string.format('%d', low + BAND), 'LIMIT', 0, 1,
    'WITHSCORES')
  return type(first) == 'table' and first[2] and tonumber(first[2]) or nil
end

-- The turn (a full score) of a new job of open lane `lane` in band `band`:
-- the one after its key's last, or, with none of its key's jobs waiting,
-- the front of the band (with none waiting there, where the next job
-- without a key would stand).  `book` caches, per call, the entries read
-- (lane -> last turn, false: none) and the fronts (fronts: band -> score);
-- the caller writes the entries back once.
local function take_turn(book, lane, band)
  local last = book[lane]
  if last == nil then
    local raw = redis.pcall('HGET', KEY_TURNS, lane)
    last = type(raw) == 'string' and tonumber(raw) or false
    if last ~= last then
      last = false  -- nan: junk
    end
  end
  local front = book.fronts[band]
  if not front then
    front = band_head(band) or (band * BAND + (tonumber(redis.call('GET', SEQ)) or 0))
    book.fronts[band] = front
  end
  local turn = (last and last >= front) and last + 1 or front
  book[lane] = turn
  return turn
end

-- The entries a call gave turns to (take_turn's book) back into KEY_TURNS.
local function write_turns(book)
  local keep = {}
  for lane, turn in pairs(book) do
    if lane ~= 'fronts' and turn then
      keep[#keep + 1], keep[#keep + 2] = lane, turn
    end
  end
  for first = 1, #keep, 2000 do  -- unpack has a limit: a delay_many of 10,000 keys goes in slices
    redis.pcall('HSET', KEY_TURNS, unpack(keep, first, math.min(first + 1999, #keep)))
  end
end

-- Keyed jobs of open lanes were claimed, the highest turn among them `top`
-- (its sequence part): SEQ moves up to it.
local function seq_past(top)
  local seq = redis.pcall('GET', SEQ)
  if (seq == false or type(seq) == 'string') and top > (tonumber(seq or 0) or top) then
    redis.call('SET', SEQ, top)
  end
end

-- One step of the sweep of stale entries (see KEY_TURNS).
local function sweep_turns()
  local at = redis.pcall('GET', TURNS_AT)
  local step = redis.pcall('HSCAN', KEY_TURNS, type(at) == 'string' and at or '0', 'COUNT', SWEEP_COUNT)
  if type(step) ~= 'table' or step.err then
    return
  end
  local heads, stale = {}, {}
  local found = step[2]
  for i = 1, #found, 2 do
    local lane, last = found[i], tonumber(found[i + 1])
    local band = (string.byte(lane, 1) or 0) - 48
    if band >= 0 and band <= 3 then
      if heads[band] == nil then
        heads[band] = band_head(band) or false
      end
      if not last or not heads[band] or last < heads[band] then
        stale[#stale + 1] = lane
      end
    else
      stale[#stale + 1] = lane  -- not a lane's entry (written by hand)
    end
  end
  if #stale > 0 then
    redis.pcall('HDEL', KEY_TURNS, unpack(stale))
  end
  if step[1] ~= '0' then
    redis.pcall('SET', TURNS_AT, step[1])
  elseif at then
    redis.pcall('DEL', TURNS_AT)
  end
end

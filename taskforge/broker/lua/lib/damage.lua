-- Damage: the checks that stop a script before its first write when one of
-- the queue's fixed keys cannot take what the script is about to do.

-- Queue-level damage (a fixed key of the wrong type, a junk or exhausted
-- seq) must stop a script before its first write: Redis does not undo the
-- writes a script made before a command failed, so a later failure would
-- leave a job half-moved.  These checks run only on paths that are not the
-- hot path, or only once a cheap read said something is off; the client
-- names the damaged key (broker/damage.py).
local function need_zsets(...)
  for _, key in ipairs({...}) do
    local kind = redis.call('TYPE', key)['ok']
    if kind ~= 'zset' and kind ~= 'none' then
      error('taskforge: ' .. key .. ' is a ' .. kind .. ', not a zset')
    end
  end
end

local function need_seq()
  local n = tonumber(redis.call('GET', SEQ) or 0)
  if not n or n ~= n or n >= BAND - 1000000 then
    error('taskforge: ' .. SEQ .. ' is not a usable sequence number')
  end
end

-- pending_key reads the limits hash (HEXISTS) half-way through a transition
-- for a limited task's job; scripts that may get there read it up front.
local function need_limits()
  redis.call('HEXISTS', LIMITS, '')
end

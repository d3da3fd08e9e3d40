-- wrk script for bench/wrk.sh: POST /messages as a random one of BENCH_USERS
-- users (default 10,000), so that the load is spread over many limit rows
-- and the per-user limit grants (each user sends a few requests a minute).

local users = tonumber(os.getenv("BENCH_USERS") or "10000")
local next_thread_id = 0

-- Runs in the main Lua state: gives every thread its own random seed.
function setup(thread)
  next_thread_id = next_thread_id + 1
  thread:set("thread_id", next_thread_id)
end

function init(args)
  math.randomseed(os.time() * 1000 + thread_id)
end

function request()
  local body = string.format('{"user": "u%d", "text": "hello from wrk"}', math.random(1, users))
  return wrk.format("POST", "/messages", { ["Content-Type"] = "application/json" }, body)
end

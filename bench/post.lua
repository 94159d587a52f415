-- wrk script: POST one AdmissionReview body over keep-alive and report rate and tail latency.
-- Usage: wrk ... -s bench/post.lua URL -- BODY_FILE
-- Prints one machine-readable line at the end:
--   RESULT requests=N duration_s=S rps=R p50_us=.. p99_us=.. p999_us=.. max_us=.. errors=E non2xx=X

local body_file

function init(args)
  body_file = args[1]
  local f = assert(io.open(body_file, "rb"))
  wrk.body = f:read("*a")
  f:close()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function done(summary, latency, requests)
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.timeout
  io.write(string.format(
    "RESULT requests=%d duration_s=%.3f rps=%.1f p50_us=%d p99_us=%d p999_us=%d max_us=%d errors=%d non2xx=%d\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max,
    errors, e.status))
end

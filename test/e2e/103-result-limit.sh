#!/usr/bin/env bash
# A job's result (its sink steps' outputs, each up to 16 MiB) is bounded by
# the worker's --max-result-bytes: past it the job fails with 54000, not
# retried, each step's output still in its step_completed event.  Unbounded,
# 20 steps of 15 MB (300 MB, past jsonb's 255 MiB) held the worker's event
# loop for minutes in libpq's send of the finish, its lease expired, and the
# job failed as worker_lost.  And `bgexec status` (text) reads at most 8192
# characters of a payload, result or error, not a whole result of many MB
# (57 MB took 3 s and 343 MB to print 2 kB); --json prints it whole.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58024

start_worker w1 --lease 30 --max-result-bytes 1000000
steps() {  # steps N: N sql steps of a 400 kB output each, all sinks
  local i out=""
  for ((i = 0; i < $1; i++)); do out+="${out:+,}{\"id\": \"s$i\", \"sql\": \"SELECT repeat('x', 400000) AS s\"}"; done
  echo "{\"steps\": [$out]}"
}

# Past the limit (3 x 400 kB): failed, 54000, once (max_attempts 3), its steps' outputs kept.
over=$("$BGEXEC" submit workflow "$(steps 3)" --max-attempts 3) || fail "submit over"
wait_status "$over" failed 60
row=$(sql "SELECT attempt, error->>'sqlstate', (error->>'result_bytes')::bigint > 1000000, error->>'max_result_bytes',
                  error->>'retryable', error->>'message' LIKE '%over the worker''s --max-result-bytes of 1000000%'
           FROM bgexec.job WHERE id = $over")
[[ $row == "1|54000|t|1000000|false|t" ]] || fail "over the limit: $row; $(sql "SELECT error FROM bgexec.job WHERE id = $over")"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $over AND kind = 'step_completed'
            AND octet_length(data::text) > 400000") == 3 ]] || fail "the steps' outputs are not all in their events"
sleep 1
status_is "$over" failed || fail "re-run: $(job_status "$over")"
grep -q 'msg="job result over the limit" job_id='"$over"' bytes=[0-9]* limit=1000000' "$E2E_DIR/w1.log" \
  || fail "no log line"

# Under it (2 x 400 kB): completed.
under=$("$BGEXEC" submit workflow "$(steps 2)") || fail "submit under"
wait_status "$under" completed 60

# A bad value: refused, naming the flag and the range.
if "$BGEXEC" worker --max-result-bytes 300000000 >"$E2E_DIR/bad.out" 2>&1; then fail "300000000 accepted"; fi
grep -q -- '--max-result-bytes: expected a number of bytes from 1 to 256000000' "$E2E_DIR/bad.out" \
  || fail "bad value: $(cat "$E2E_DIR/bad.out")"

# status on a 40 MB result: the first 2000 bytes of it compacted, as before,
# at a small RSS (the old client: about 300 MB).
sql "UPDATE bgexec.job SET result = (SELECT jsonb_agg(jsonb_build_object('k', i, 'v', repeat('y', 100)))
                                     FROM generate_series(1, 350000) i) WHERE id = $under"
/usr/bin/time -f %M -o "$E2E_DIR/rss" "$BGEXEC" status "$under" >"$E2E_DIR/status.out" || fail "status"
"$BGEXEC" status "$under" --json >"$E2E_DIR/status.json" || fail "status --json"
python3 - "$E2E_DIR/status.json" "$E2E_DIR/status.out" <<'PY' || fail "status output"
import json, sys
full = json.load(open(sys.argv[1]))["result"]
assert len(full) == 350000, len(full)
want = "result: " + json.dumps(full, separators=(",", ":"))[:2000] + "..."
lines = [l for l in open(sys.argv[2]).read().split("\n") if l.startswith("result: ")]
assert lines == [want], (lines[0][:100] if lines else None)
PY
rss=$(cat "$E2E_DIR/rss")
((rss < 40 * 1024)) || fail "status took $rss KiB of RSS"

# Small ones as before: compacted (a string's blanks kept); a JSON string printed whole.
sql "UPDATE bgexec.job SET result = '{\"a\": [1, 2], \"b\": \"x, y\"}', payload = to_jsonb(repeat('z', 9000) || ' end')
     WHERE id = $under"
"$BGEXEC" status "$under" >"$E2E_DIR/small.out" || fail "status small"
grep -qx 'result: {"a":\[1,2\],"b":"x, y"}' "$E2E_DIR/small.out" || fail "small: $(cat "$E2E_DIR/small.out")"
grep -qx "payload: $(printf 'z%.0s' {1..9000}) end" "$E2E_DIR/small.out" || fail "a string payload is not whole"
ok "54000 past the limit, once; status of 40 MB in $rss KiB"

#!/usr/bin/env bash
# A 3-step workflow passes outputs between steps: action → run → sql.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57941

cat >"$E2E_DIR/export.sh" <<'SH'
#!/bin/sh
# action: reads {"day": ...} on stdin, prints a JSON object, logs to stderr
read -r input
echo "exporting $input" >&2
printf '{"path": "/data/orders.csv", "rows": 3, "day": %s}\n' "$(echo "$input" | sed 's/.*"day":\("[^"]*"\).*/\1/')"
SH
chmod +x "$E2E_DIR/export.sh"
sql "CREATE TABLE loads (path text, n int)"

start_worker w1 --allow-run --action "export-orders=$E2E_DIR/export.sh"
id=$("$BGEXEC" submit workflow '{"input": {"day": "2026-11-29"}, "steps": [
  {"id": "extract", "action": "export-orders", "with": {"day": "{{input.day}}"}},
  {"id": "count", "needs": ["extract"], "run": ["sh", "-c", "echo {{steps.extract.output.rows}}; echo counted >&2"]},
  {"id": "load", "needs": ["count"], "sql": "INSERT INTO loads VALUES ($1, $2::int) RETURNING path, n",
   "params": ["{{steps.extract.output.path}}", "{{steps.count.stdout}}"]}]}') || fail "submit"

"$BGEXEC" submit noop --wait >/dev/null || fail "noop job did not complete"
timeout 30 "$BGEXEC" tail "$id" >"$E2E_DIR/tail.out" || fail "tail exit code $?"
wait_status "$id" completed 10
result=$(sql "SELECT result FROM bgexec.job WHERE id = $id")
[[ $result == '{"load": [{"n": 3, "path": "/data/orders.csv"}]}' ]] || fail "result: $result"
[[ $(sql "SELECT count(*) FROM loads WHERE path = '/data/orders.csv' AND n = 3") == 1 ]] || fail "sql step"
[[ $(sql "SELECT data->'output'->>'day' FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_completed' AND data->>'step' = 'extract'") == 2026-11-29 ]] \
  || fail "templated input did not reach the action"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'log' AND data->>'stream' = 'stderr'") -ge 2 ]] \
  || fail "stderr lines not stored as log events"
grep -q "completed" "$E2E_DIR/tail.out" || fail "tail output"
# Every connection of the worker says what it is in pg_stat_activity (the
# finish connection opens with the first finish, so after the jobs).
apps=$(sql "SELECT string_agg(DISTINCT application_name, ',' ORDER BY application_name)
              FROM pg_stat_activity WHERE application_name LIKE 'bgexec worker %'")
[[ $apps == "bgexec worker control,bgexec worker finish,bgexec worker heartbeat,bgexec worker listen" ]] \
  || fail "application_name of the worker's connections: $apps"
# gapless seq
[[ $(sql "SELECT count(*) = max(seq) FROM bgexec.job_event WHERE job_id = $id") == t ]] || fail "seq gap"
ok

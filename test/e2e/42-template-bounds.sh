#!/usr/bin/env bash
# A job's templates render within a bound: the rendered fields of its
# running steps hold at most 64 MiB, freed as each step ends.  A template
# repeated in a string or an array copies its value each time, and a
# payload of 100 kB rendered to a quarter of a gigabyte (a megabyte of
# payload: gigabytes) in the worker that serves every tenant's jobs.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57996
start_worker w1 --lease 10
X=$(head -c 50000 /dev/zero | tr '\0' x)
# submit_file FILE: submits the workflow payload in FILE (past an argument's 128 kB)
submit_file() {
  psql -qXAt -v ON_ERROR_STOP=1 -v "payload_file=$1" <<'SQL'
\set payload `cat :payload_file`
SELECT bgexec.submit('workflow', :'payload'::jsonb);
SQL
}
# payload FILE STEPS_JSON: {"input": {"x": X}, "steps": STEPS_JSON}
payload() { jq -cn --arg x "$X" --argjson steps "$2" '{input: {x: $x}, steps: $steps}' >"$1"; }
# refs N: N templates of input.x spliced into one string
refs() { local i s=""; for ((i = 0; i < $1; i++)); do s+="{{input.x}}"; done; printf '%s' "$s"; }
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$PID_w1/status"; }
base=$(hwm_kb)

# 5000 copies of 50 kB in one parameter: 250 MB, refused before it is held
payload "$E2E_DIR/big.json" "[{\"id\": \"q\", \"sql\": \"SELECT length(\$1) AS n\", \"params\": [\"$(refs 5000)\"]}]"
id=$(submit_file "$E2E_DIR/big.json") || fail submit
wait_status "$id" failed 30
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $id") == \
   "template {{input.x}}: the rendered value would be over 67108864 bytes, the most the rendered fields of a job's running steps hold" ]] \
  || fail "error $(sql "SELECT error FROM bgexec.job WHERE id = $id")"
[[ $(sql "SELECT error->>'retryable' FROM bgexec.job WHERE id = $id") == false ]] || fail "retryable"
grown=$(( $(hwm_kb) - base ))
echo "# the worker's peak RSS grew by $((grown / 1024)) MiB" >&2
(( grown < 300 * 1024 )) || fail "the worker's peak RSS grew by $((grown / 1024)) MiB for a payload of $(( $(wc -c <"$E2E_DIR/big.json") / 1024 )) kB"

# the same as an array of lone templates
lone=$(jq -cn '[range(5000) | "{{input.x}}"]')
payload "$E2E_DIR/lone.json" "[{\"id\": \"q\", \"sql\": \"SELECT 1 AS one\", \"params\": $lone}]"
id=$(submit_file "$E2E_DIR/lone.json") || fail submit
wait_status "$id" failed 30
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $id") == "template {{input.x}}: the rendered value would be over"* ]] \
  || fail "array: error $(sql "SELECT error FROM bgexec.job WHERE id = $id")"

# two steps of 40 MB each, one after the other: the first one's share is
# freed when it ends; side by side they are over the bound
payload "$E2E_DIR/seq.json" "[{\"id\": \"a\", \"sql\": \"SELECT length(\$1) AS n\", \"params\": [\"$(refs 800)\"]},
  {\"id\": \"b\", \"needs\": [\"a\"], \"sql\": \"SELECT length(\$1) AS n\", \"params\": [\"$(refs 800)\"]}]"
id=$(submit_file "$E2E_DIR/seq.json") || fail submit
wait_status "$id" completed 60
[[ $(sql "SELECT result->'b'->0->>'n' FROM bgexec.job WHERE id = $id") == 40000000 ]] \
  || fail "result $(sql "SELECT left(result::text, 200) FROM bgexec.job WHERE id = $id")"
payload "$E2E_DIR/par.json" "[{\"id\": \"a\", \"sql\": \"SELECT pg_sleep(1), length(\$1) AS n\", \"params\": [\"$(refs 800)\"]},
  {\"id\": \"b\", \"sql\": \"SELECT pg_sleep(1), length(\$1) AS n\", \"params\": [\"$(refs 800)\"]}]"
id=$(submit_file "$E2E_DIR/par.json") || fail submit
wait_status "$id" failed 60
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $id") == "template {{input.x}}: the rendered value would be over"* ]] \
  || fail "side by side: error $(sql "SELECT error FROM bgexec.job WHERE id = $id")"
kill -TERM "$PID_w1"; wait "$PID_w1" || fail "w1 exit status $?"
ok

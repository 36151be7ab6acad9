#!/usr/bin/env bash
# A step's large output is made storable, parsed, masked and written as
# text off the worker's event loop (Worker::offload), so the worker's other
# jobs keep their leases meanwhile.  On the loop, the JSON below held it
# for about 3 s in one stretch, 16 MB of NUL for 5 s (the U+FFFD repair,
# the parse, three maskings, two dumps): no heartbeat went out, and on the
# tests' 2 s lease the worker gave up every job it held, the one beside the
# large outputs too (worker_lost).
source "$(dirname "$0")/lib.sh"
e2e_cluster 58003
export BGEXEC_SECRET_TOK=t0k-e2e-84
start_worker w1 --allow-run  # the tests' 2 s lease
# A job beside the large outputs, on the same worker, holding its lease
# by heartbeats the whole time: its step waits for the test's go.
beside=$("$BGEXEC" submit workflow --max-attempts 1 '{"steps": [{"id": "wait", "timeout": 300,
  "run": ["sh", "-c", "while [ ! -e '"$E2E_DIR"'/go ]; do sleep 0.1; done"]}]}') || fail submit
wait_status "$beside" running 30
# NUL bytes (each becomes U+FFFD: 12 MB of text), and near the 16 MiB cap
# JSON of 160000 objects, with a secret in it to mask.  (JSON of millions
# of values is as slow for the database to store: on this 2-core machine
# its heartbeats then timed out, whatever the worker did.)
big=$("$BGEXEC" submit workflow --max-attempts 1 '{"steps": [
  {"id": "nul", "run": ["head", "-c", "4000000", "/dev/zero"]},
  {"id": "json", "needs": ["nul"], "env": {"T": "{{secrets.TOK}}"},
   "run": ["python3", "-c", "import json, os, sys; json.dump([{\"k\": \"v\" * 90}] * 160000 + [os.environ[\"T\"]], sys.stdout)"]}]}') \
  || fail submit
wait_for 180 job_ended "$big" || fail "job $big is $(job_status "$big")"
touch "$E2E_DIR/go"
wait_for 60 job_ended "$beside" || fail "job $beside is $(job_status "$beside")"
[[ $(job_status "$beside") == completed ]] \
  || fail "the job beside the large outputs: $(sql "SELECT status, error FROM bgexec.job WHERE id = $beside")"
if grep "abandoning job" "$E2E_DIR/w1.log" | grep -q "job_id=$beside\b"; then
  fail "job $beside given up: $(grep "abandoning job" "$E2E_DIR/w1.log")"
fi
# The large outputs as stored on the loop before (a 2 s lease may still
# lose the job itself while the database stores its outputs: README,
# Troubleshooting; then there is nothing to compare).
# The result holds the final step's output only; the first step's is in
# its step_completed event.
if [[ $(job_status "$big") == completed ]]; then
  [[ $(sql "SELECT length(data->>'output') FROM bgexec.job_event
             WHERE job_id = $big AND kind = 'step_completed' AND data->>'step' = 'nul'") == 4000000 ]] \
    || fail "nul output: $(sql "SELECT length(data->>'output') FROM bgexec.job_event
                                WHERE job_id = $big AND kind = 'step_completed' AND data->>'step' = 'nul'")"
  [[ $(sql "SELECT jsonb_array_length(result->'json') || ' ' || (result->'json'->>-1) FROM bgexec.job WHERE id = $big") \
     == "160001 ***" ]] || fail "json output: $(sql "SELECT left(result::text, 200) FROM bgexec.job WHERE id = $big")"
fi
kill -0 "$PID_w1" || fail "worker died"
ok

#!/usr/bin/env bash
# Job execution at the edges: data that crashed the worker, and secrets that
# reached the database in a form the masker did not know.
#  - JSON nested past core::max_json_depth (a step's stdout, a ::progress
#    line, a payload) fails the step or job with a clear error, or stays a
#    log line; the worker (and every other job it runs) lives on.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57961
start_worker w1 --allow-run

# --- deep JSON ---------------------------------------------------------------
# A run step printing 200 000 nested arrays (400 kB): the recursive copy of the
# parsed output overflowed the worker's stack (SIGSEGV, every job lost).
deep=$("$BGEXEC" submit workflow '{"steps": [{"id": "deep", "run": ["python3", "-c",
  "print(\"[\" * 200000 + \"]\" * 200000)"]}]}') || fail submit
wait_status "$deep" failed 20
kill -0 "$PID_w1" || fail "worker died on a deeply nested step output"
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $deep") == *"nested deeper than 512 levels"* ]] \
  || fail "deep output error: $(sql "SELECT error FROM bgexec.job WHERE id = $deep")"
# A ::progress line nested too deep is kept as a log line; the job completes
# (the batch holding it failed the job with PostgreSQL's stack depth error).
prog=$("$BGEXEC" submit workflow '{"steps": [{"id": "p", "run": ["python3", "-c",
  "import sys; sys.stderr.write(\"::progress \" + \"[\" * 30000 + \"]\" * 30000 + \"\\n\"); print(1)"]}]}') || fail submit
wait_status "$prog" completed 20
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $prog AND kind = 'log'
          AND data->'lines'->>0 LIKE '::progress [[[%'") == 1 ]] || fail "deep progress line not kept as a log line"
# A payload deeper than the limit (a server whose max_stack_depth lets
# submit take it) fails its job, not the worker.
deep_payload=$(psql -qXAt -c "SET max_stack_depth = '7MB'" -c "SELECT bgexec.submit('workflow',
  ('{\"steps\": [{\"id\": \"a\", \"run\": [\"true\"]}], \"input\": ' || repeat('[', 30000) || repeat(']', 30000) || '}')::jsonb)") \
  || fail "submit deep payload"
wait_status "$deep_payload" failed 20
kill -0 "$PID_w1" || fail "worker died on a deeply nested payload"
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $deep_payload") == "payload nested deeper than 512 levels" ]] \
  || fail "deep payload error: $(sql "SELECT error FROM bgexec.job WHERE id = $deep_payload")"
# Nesting within the limit is unchanged.
fine=$("$BGEXEC" submit workflow '{"steps": [{"id": "n", "run": ["python3", "-c",
  "print(\"[\" * 400 + \"]\" * 400)"]}]}') || fail submit
wait_status "$fine" completed 20

kill -0 "$PID_w1" || fail "worker died"
ok

#!/usr/bin/env bash
# A step's JSON output holds its numbers as PostgreSQL stores them (numeric:
# 1e2 is 100), in the run that printed it as in a re-run reading it back;
# its stdout is what it printed.  The worker kept 1e2 as printed: the run
# that printed it rendered {{steps.a.output}} as {"n":1e2}, a run after a
# resume or a retry as {"n":100}, and, the output's text taken for its
# stdout, {{steps.a.stdout}} as {"n":100} too.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57952
D=$E2E_DIR/shared; mkdir -p "$D"; chmod 777 "$D"
start_worker w1 --allow-run
want='{"n":1e2} {"n":100}'
step_out() { sql "SELECT data->>'output' FROM bgexec.job_event WHERE job_id = $1 AND kind = 'step_completed' AND data->>'step' = '$2'"; }

# b runs in the run that printed a's output, c in the run after the resume
id=$("$BGEXEC" submit workflow '{"steps": [
  {"id": "a", "run": ["echo", "{\"n\":1e2}"]},
  {"id": "b", "needs": ["a"], "run": ["echo", "{{steps.a.stdout}} {{steps.a.output}}"]},
  {"id": "g", "needs": ["b"], "approval": true},
  {"id": "c", "needs": ["g", "a"], "run": ["echo", "{{steps.a.stdout}} {{steps.a.output}}"]}]}') || fail submit
wait_status "$id" suspended 20
[[ $(step_out "$id" b) == "$want" ]] || fail "b (first run) printed $(step_out "$id" b)"
[[ $(sql "SELECT data->>'stdout' FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_completed' AND data->>'step' = 'a'") == '{"n":1e2}' ]] \
  || fail "a's stdout is not recorded: $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_completed' AND data->>'step' = 'a'")"
"$BGEXEC" resume "$id" >/dev/null || fail resume
wait_status "$id" completed 20
[[ $(step_out "$id" c) == "$want" ]] || fail "c (after resume) printed $(step_out "$id" c)"

# the same across a retry: b fails its first run and reads a's output in the
# next.  a prints its keys in order and compact, as the output writes them.
id=$("$BGEXEC" submit workflow "{\"steps\": [
  {\"id\": \"a\", \"run\": [\"echo\", \"{\\\"m\\\":2.50E+1,\\\"n\\\":1e2,\\\"t\\\":1e-3,\\\"z\\\":-0.0}\"]},
  {\"id\": \"b\", \"needs\": [\"a\"], \"run\": [\"sh\", \"-c\",
    \"echo \\\"\$0\\\"; [ -e $D/second ] && exit 0; touch $D/second; exit 3\", \"{{steps.a.stdout}} {{steps.a.output}}\"]}]}") \
  || fail submit
want='{"m":2.50E+1,"n":1e2,"t":1e-3,"z":-0.0} {"m":25.0,"n":100,"t":0.001,"z":0.0}'
wait_status "$id" failed 20
b_log() { sql "SELECT data->'lines'->>0 FROM bgexec.job_event WHERE job_id = $id AND kind = 'log' AND data->>'step' = 'b' ORDER BY seq LIMIT 1"; }
[[ $(b_log) == "$want" ]] || fail "b (first run) printed $(b_log)"
"$BGEXEC" retry "$id" >/dev/null || fail retry
wait_status "$id" completed 20
[[ $(step_out "$id" b) == "$want" ]] || fail "b (after retry) printed $(step_out "$id" b)"
kill -TERM "$PID_w1"; wait "$PID_w1" || fail "w1 exit status $?"
ok

#!/usr/bin/env bash
# {{steps.ID.stdout}} of a sql step is its rows as compact JSON, the same in
# the run that ran the step as in a later one (retry, resume) that reads it
# back.  It failed the first ("step \"q\" has no stdout") and rendered the
# rows in the second: a job failed, and its retry completed.  Of an
# approval resumed without input, "null".
source "$(dirname "$0")/lib.sh"
e2e_cluster 57997
start_worker w1 --lease 10
result() { sql "SELECT result->'u'->0->>'v' FROM bgexec.job WHERE id = $1"; }

# in the same run
id=$("$BGEXEC" submit workflow '{"steps": [
  {"id": "q", "sql": "SELECT 1 AS one, '\''a b'\'' AS t"},
  {"id": "u", "needs": ["q"], "sql": "SELECT $1::text AS v", "params": ["rows {{steps.q.stdout}}"]}]}') || fail submit
wait_status "$id" completed 20
[[ $(result "$id") == 'rows [{"one":1,"t":"a b"}]' ]] || fail "same run: $(sql "SELECT coalesce(error, result) FROM bgexec.job WHERE id = $id")"

# read back after an approval: the same text
id=$("$BGEXEC" submit workflow '{"steps": [
  {"id": "q", "sql": "SELECT 1 AS one, '\''a b'\'' AS t"},
  {"id": "g", "needs": ["q"], "approval": true},
  {"id": "u", "needs": ["g"], "sql": "SELECT $1::text AS v", "params": ["rows {{steps.q.stdout}}"]}]}') || fail submit
wait_status "$id" suspended 20
"$BGEXEC" resume "$id" '"yes"' >/dev/null || fail resume
wait_status "$id" completed 20
[[ $(result "$id") == 'rows [{"one":1,"t":"a b"}]' ]] || fail "after resume: $(sql "SELECT coalesce(error, result) FROM bgexec.job WHERE id = $id")"
# the event carries the rows once (as their output), no stdout of its own
[[ $(sql "SELECT data ? 'stdout' FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_completed' AND data->>'step' = 'q'") == f ]] \
  || fail "the sql step's event has a stdout"

# an approval resumed without input (`bgexec resume ID`): its stdout is
# "null", as its output renders; the job failed (`step "g" has no stdout`)
id=$("$BGEXEC" submit workflow '{"steps": [
  {"id": "g", "approval": true},
  {"id": "u", "needs": ["g"], "sql": "SELECT $1::text AS v", "params": ["[{{steps.g.stdout}}]"]}]}') || fail submit
wait_status "$id" suspended 20
"$BGEXEC" resume "$id" >/dev/null || fail resume
wait_status "$id" completed 20
[[ $(result "$id") == '[null]' ]] || fail "approval without input: $(sql "SELECT coalesce(error, result) FROM bgexec.job WHERE id = $id")"
kill -TERM "$PID_w1"; wait "$PID_w1" || fail "w1 exit status $?"
ok

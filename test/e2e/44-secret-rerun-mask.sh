#!/usr/bin/env bash
# A secret the job's steps name is masked in every run of the job, whichever
# of its steps that run runs.  The worker knew a secret only once a step of
# the current run had rendered it: after a resume (or a retry) the step that
# named it was done and skipped, and a later step printing it (from a file
# the first one wrote) stored it in the job's events and result as is.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57998
SECRET=s3cr3t-rerun-$RANDOM$RANDOM
D=$E2E_DIR/shared; mkdir -p "$D"; chmod 777 "$D"
BGEXEC_SECRET_TOKEN=$SECRET start_worker w1 --allow-run --lease 10
leaks() { sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $1 AND data::text LIKE '%$SECRET%'"; }

# first the step that uses the secret, then an approval, then a step that
# prints what the first one left
id=$("$BGEXEC" submit workflow "{\"steps\": [
  {\"id\": \"login\", \"run\": [\"sh\", \"-c\", \"printf %s \\\"\$TOKEN\\\" > $D/token\"], \"env\": {\"TOKEN\": \"{{secrets.TOKEN}}\"}},
  {\"id\": \"gate\", \"needs\": [\"login\"], \"approval\": true},
  {\"id\": \"show\", \"needs\": [\"gate\"], \"run\": [\"cat\", \"$D/token\"]}]}") || fail submit
wait_status "$id" suspended 20
[[ $(cat "$D/token") == "$SECRET" ]] || fail "the secret did not reach the step"
"$BGEXEC" resume "$id" >/dev/null || fail resume
wait_status "$id" completed 20
[[ $(sql "SELECT result->>'show' FROM bgexec.job WHERE id = $id") == '***' ]] \
  || fail "after resume: result $(sql "SELECT result FROM bgexec.job WHERE id = $id")"
[[ $(leaks "$id") == 0 ]] || fail "after resume: the secret is in $(leaks "$id") events of job $id"

# the same after a retry: the step that failed prints it to its log
id=$("$BGEXEC" submit workflow "{\"steps\": [
  {\"id\": \"login\", \"run\": [\"sh\", \"-c\", \"printf %s \\\"\$TOKEN\\\" > $D/token2\"], \"env\": {\"TOKEN\": \"{{secrets.TOKEN}}\"}},
  {\"id\": \"flaky\", \"needs\": [\"login\"], \"run\": [\"sh\", \"-c\", \"if [ -e $D/second ]; then cat $D/token2; exit 3; fi; touch $D/second; exit 3\"]}]}") || fail submit
wait_status "$id" failed 20
"$BGEXEC" retry "$id" >/dev/null || fail retry
wait_for 20 test -e "$D/second" || fail "flaky did not run"
wait_for 20 bash -c "[[ \$(psql -qXAt -c \"SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed'\") == 2 ]]" \
  || fail "retry: the step did not fail again"
wait_status "$id" failed 20
[[ $(leaks "$id") == 0 ]] || fail "after retry: the secret is in $(leaks "$id") events of job $id"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'log' AND data->'lines' ? '***'") == 1 ]] \
  || fail "after retry: no masked log line"

# a secret that cannot be read fails only the step that renders it
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "a", "run": ["echo", "fine"]},
  {"id": "b", "needs": ["a"], "run": ["echo", "{{secrets.MISSING}}"]}]}') || fail submit
wait_status "$id" failed 20
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_completed' AND data->>'step' = 'a'") == 1 ]] \
  || fail "a missing secret failed the steps that do not use it"
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $id") == 'template {{secrets.MISSING}}: secret MISSING is not available' ]] \
  || fail "missing: error $(sql "SELECT error FROM bgexec.job WHERE id = $id")"
kill -TERM "$PID_w1"; wait "$PID_w1" || fail "w1 exit status $?"
ok

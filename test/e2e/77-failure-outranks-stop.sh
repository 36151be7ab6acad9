#!/usr/bin/env bash
# A step's failure outranks a stop that comes while the job's other steps
# are being killed: the job ends failed, with that step's error.  It ended
# cancelled ("stopped on request"), and a worker shutdown in that kill
# grace ended it a retryable worker_shutdown, queued again although the
# failure was marked not retryable.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57900
start_worker w1 --allow-run --kill-grace 3 --lease 30
id=$("$BGEXEC" submit workflow '{"steps": [
  {"id": "a", "run": ["sh", "-c", "sleep 0.5; exit 7"]},
  {"id": "b", "run": ["sh", "-c", "trap \"\" TERM; sleep 100"]}]}' --max-attempts 3) || fail submit
failed_a() { [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed' AND data->>'step' = 'a'") == 1 ]]; }
wait_for 20 failed_a || fail "step a did not fail: $(job_status "$id")"
"$BGEXEC" stop "$id" >/dev/null || fail stop
ended() { [[ $(job_status "$id") != @(queued|running) ]]; }
wait_for 20 ended || fail "job $id still $(job_status "$id")"
got=$(sql "SELECT status || ' ' || coalesce(error->>'step', '-') || ' ' || coalesce(error->>'message', '-') FROM bgexec.job WHERE id = $id")
[[ $got == "failed a sh: exit status 7" ]] \
  || fail "the job ended '$got'; events $(sql "SELECT string_agg(kind, ',' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $id")"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'stop_requested'") == 1 ]] \
  || fail "the stop came after the job had ended: the test tested nothing"
ok "a stop during the kill grace after a step failed: the job ended failed with the step's error"

#!/usr/bin/env bash
# A sql step's step_completed commits with the step (bgexec._step_completed)
# only under READ COMMITTED: under REPEATABLE READ (the database's
# default_transaction_isolation here) the job's row, which the worker's
# heartbeats renew while the statement runs, cannot be updated from the
# step's snapshot (40001), so the worker records it after the COMMIT, as
# before.  The step runs past two heartbeats and completes, with one
# step_completed.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58019
sql "ALTER DATABASE postgres SET default_transaction_isolation = 'repeatable read'" >/dev/null
start_worker w1 --lease 3
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/w1.log" || fail "worker did not start"
id=$("$BGEXEC" submit workflow --max-attempts 1 \
  '{"steps": [{"id": "q", "sql": "SELECT current_setting($$transaction_isolation$$) AS iso FROM pg_sleep(3)"}]}') || fail submit
wait_for 30 job_ended "$id" || fail "job $id is $(job_status "$id")"
[[ $(job_status "$id") == completed ]] || fail "job $id is $(job_status "$id"): $(sql "SELECT error FROM bgexec.job WHERE id = $id")"
[[ $(sql "SELECT result->'q'->0->>'iso' FROM bgexec.job WHERE id = $id") == "repeatable read" ]] \
  || fail "the step did not run under repeatable read: $(sql "SELECT result FROM bgexec.job WHERE id = $id")"
n=$(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_completed'")
[[ $n == 1 ]] || fail "job $id has $n step_completed events"
ok "a sql step under repeatable read completes, recorded once"

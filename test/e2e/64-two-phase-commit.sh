#!/usr/bin/env bash
# Two-phase commit: PostgreSQL refuses PREPARE TRANSACTION after a NOTIFY,
# and submit, stop, retry and resume send one.  With bgexec.notify_jobs and
# bgexec.notify_events off for the transaction (SET LOCAL) it prepares, and
# after COMMIT PREPARED the workers find the work at their next poll (the
# commit-time wakes are not sent for a prepared transaction): the job runs,
# the stop lands at the next heartbeat, the retried job runs again.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57971 "max_prepared_transactions = 4"
# A 30 s lease: the prepared stop holds the job's row until COMMIT PREPARED,
# and the heartbeat renews no lease it cannot lock (README, heartbeat).
start_worker w1 --allow-run --poll 1 --lease 30
off="SET LOCAL bgexec.notify_jobs = off; SET LOCAL bgexec.notify_events = off;"
wf='{"steps": [{"id": "s", "run": ["sleep", "60"]}]}'

# Without the settings: the documented refusal, and nothing submitted.
out=$(psql -qXAt -v ON_ERROR_STOP=1 -c "BEGIN" -c "SELECT bgexec.submit('noop', payload => '{\"tpc\": 0}')" \
        -c "PREPARE TRANSACTION 'tpc0'" 2>&1) && fail "PREPARE after a submit was accepted: $out"
[[ $out == *"cannot PREPARE a transaction that has executed LISTEN, UNLISTEN, or NOTIFY"* ]] || fail "refusal: $out"
[[ $(sql "SELECT count(*) FROM bgexec.job") == 0 ]] || fail "the refused transaction left a job"
ok "PREPARE after a plain submit is refused, nothing submitted"

# Submit in a prepared transaction: invisible until COMMIT PREPARED, then run.
id=$(psql -qXAt -v ON_ERROR_STOP=1 -c "BEGIN" -c "$off" \
       -c "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"s\", \"run\": [\"true\"]}]}')" \
       -c "PREPARE TRANSACTION 'tpc1'") || fail "PREPARE after a submit with notify_jobs off: $id"
[[ $id =~ ^[0-9]+$ ]] || fail "submit returned '$id'"
sleep 2
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE id = $id") == 0 ]] || fail "a prepared submit is visible"
sql "COMMIT PREPARED 'tpc1'" || fail "COMMIT PREPARED"
wait_status "$id" completed 20
ok "a job submitted in a prepared transaction ran after COMMIT PREPARED"

# Stop of a running job in a prepared transaction.
id=$("$BGEXEC" submit workflow "$wf") || fail submit
wait_status "$id" running 20
wait_for 10 grep -q "step started.*job_id=$id" "$E2E_DIR/w1.log" || fail "the step did not start"
psql -qXAt -v ON_ERROR_STOP=1 -c "BEGIN" -c "$off" -c "SELECT bgexec.stop($id)" \
  -c "PREPARE TRANSACTION 'tpc2'" >/dev/null || fail "PREPARE after stop"
sleep 1
status_is "$id" running || fail "the stop acted before COMMIT PREPARED: $(job_status "$id")"
sql "COMMIT PREPARED 'tpc2'" || fail "COMMIT PREPARED"
wait_status "$id" cancelled 20
ok "a stop in a prepared transaction cancelled the running job"

# Retry of the cancelled job in a prepared transaction: it runs again.
psql -qXAt -v ON_ERROR_STOP=1 -c "BEGIN" -c "$off" -c "SELECT bgexec.retry($id)" \
  -c "PREPARE TRANSACTION 'tpc3'" >/dev/null || fail "PREPARE after retry"
sql "COMMIT PREPARED 'tpc3'" || fail "COMMIT PREPARED"
started_twice() { [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $1 AND kind = 'started'") -ge 2 ]]; }
wait_for 20 started_twice "$id" \
  || fail "the retried job did not start again: $(job_status "$id") $(sql "SELECT string_agg(seq || ' ' || kind, ', ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $id")"
"$BGEXEC" stop "$id" >/dev/null || fail stop
ok "a retry in a prepared transaction ran the job again"
[[ $(sql "SELECT count(*) FROM pg_prepared_xacts") == 0 ]] || fail "prepared transactions left"

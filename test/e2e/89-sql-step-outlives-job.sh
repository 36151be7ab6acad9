#!/usr/bin/env bash
# A sql step's statement does not outlive its job's attempt.  A statement
# may turn the server's connection check off (client_connection_check_interval
# is a user's setting) and catch every cancel: the session the worker closes
# after --kill-grace then ran on for ever (nothing reads its socket), its
# transaction and locks held, after a step timeout, beside the job's next
# attempt after a retryable failure, and after a stop; only reconcile's
# take-back of a lease ended step sessions.  Now the finish that takes the
# job out of running under its lease ends its step sessions when it commits
# (extension/step_session.c).
source "$(dirname "$0")/lib.sh"
e2e_cluster 58008
# TAG names the job in the statement's text, so pg_stat_activity tells
# the jobs apart.  Two handlers, as 41-sql-cancel-caught's: a cancel that
# falls on the inner loop's check is caught by the outer one.
stubborn() {
  local s="DO \$d\$ BEGIN PERFORM set_config('client_connection_check_interval', '0', true); PERFORM '$1'; LOOP BEGIN LOOP BEGIN PERFORM pg_sleep(0.2); EXCEPTION WHEN query_canceled THEN RAISE NOTICE 'caught'; END; END LOOP; EXCEPTION WHEN query_canceled THEN RAISE NOTICE 'caught'; END; END LOOP; END \$d\$"
  jq -Rn --arg s "$s" '$s'
}
backends() {  # TAG: pids of the step sessions running TAG's statement
  sql "SELECT string_agg(pid::text, ' ' ORDER BY pid) FROM pg_stat_activity
        WHERE application_name = 'bgexec worker sql-step' AND query LIKE '%''$1''%'"
}
count_is() { [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bgexec worker sql-step' AND query LIKE '%''$1''%'") == "$2" ]]; }
pid_gone() { [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE pid = $1") == 0 ]]; }
start_worker w1 --lease 10 --kill-grace 0.5

# a step timeout: the job fails, and its statement ends
id=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"q\", \"sql\": $(stubborn t1), \"timeout\": 1}]}") || fail submit
wait_for 10 count_is t1 1 || fail "step timeout: the statement did not start"
wait_for 15 job_ended "$id" || fail "step timeout: job $id is $(job_status "$id")"
[[ $(sql "SELECT error->>'reason' FROM bgexec.job WHERE id = $id") == step_timeout ]] \
  || fail "step timeout: error $(sql "SELECT error FROM bgexec.job WHERE id = $id")"
wait_for 10 count_is t1 0 || fail "step timeout: job $id $(job_status "$id"), its statement still runs 10 s later (backends $(backends t1))"
ok "a step timeout ends the statement"

# a failure with a retry: the first attempt's statement ends before (or as)
# the next attempt starts; never two at once; none after the job failed
id=$("$BGEXEC" submit workflow --max-attempts 2 "{\"steps\": [{\"id\": \"q\", \"sql\": $(stubborn t2), \"timeout\": 1}]}") || fail submit
wait_for 10 count_is t2 1 || fail "retry: the statement did not start"
first=$(backends t2)
retried() { [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'retry_scheduled'") == 1 ]]; }
wait_for 15 retried || fail "retry: no retry_scheduled for job $id ($(job_status "$id"))"
wait_for 10 pid_gone "$first" || fail "retry: the first attempt's statement (pid $first) still runs 10 s after its retry was scheduled"
wait_for 15 job_ended "$id" || fail "retry: job $id is $(job_status "$id")"
[[ $(job_status "$id") == failed ]] || fail "retry: job $id is $(job_status "$id")"
wait_for 10 count_is t2 0 || fail "retry: job $id failed, its statements still run 10 s later (backends $(backends t2))"
ok "a failure with a retry ends the statement of each attempt"

# a stop: the job is cancelled, and its statement ends
id=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"q\", \"sql\": $(stubborn t3)}]}") || fail submit
wait_for 10 count_is t3 1 || fail "stop: the statement did not start"
"$BGEXEC" stop "$id" >/dev/null || fail stop
wait_for 15 job_ended "$id" || fail "stop: job $id is $(job_status "$id")"
[[ $(job_status "$id") == cancelled ]] || fail "stop: job $id is $(job_status "$id")"
wait_for 10 count_is t3 0 || fail "stop: job $id cancelled, its statement still runs 10 s later (backends $(backends t3))"
grep -q "terminating the sql step session (pid [0-9]*) of job $id" "$E2E_DIR/pg/postgres.log" \
  || fail "stop: the server logged no end of job $id's step session"
ok "a stop ends the statement"

# the worker carries on
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "q", "sql": "SELECT 1 AS one"}]}') || fail submit
wait_status "$id" completed 10
kill -TERM "$PID_w1"; wait "$PID_w1" || fail "w1 exit status $?"
ok

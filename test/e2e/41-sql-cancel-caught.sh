#!/usr/bin/env bash
# A sql step whose statement does not end on its cancel (it catches
# query_canceled, as a PL/pgSQL retry loop may) still ends on its step
# timeout and on a stop: after the cancel and --kill-grace the worker
# closes the step's session, and the server ends the statement and rolls
# its transaction back.  The step ran on for ever, and its job stayed
# running, its lease renewed by every heartbeat.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57995
# A statement that catches every cancel, counting its rounds in a table
# (a row per round, committed only with the step's transaction).  Two
# handlers: PL/pgSQL checks for a cancel before each statement, and one
# that fell on the inner loop's check, outside the inner handler, ended
# the statement (once in a CI run: no session to close).
sql "CREATE TABLE rounds (n int)" >/dev/null
STUBBORN="DO \$\$ BEGIN LOOP BEGIN LOOP BEGIN INSERT INTO rounds VALUES (1); PERFORM pg_sleep(0.1); EXCEPTION WHEN query_canceled THEN RAISE NOTICE 'cancel caught'; END; END LOOP; EXCEPTION WHEN query_canceled THEN RAISE NOTICE 'cancel caught'; END; END LOOP; END \$\$"
stubborn_json=$(jq -Rn --arg s "$STUBBORN" '$s')
running() {  # COUNT: sessions running the stubborn statement
  [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'DO \$\$ BEGIN LOOP%' AND pid <> pg_backend_pid()") == "$1" ]]
}
start_worker w1 --lease 10 --kill-grace 0.5

# step timeout: the step fails step_timeout, retryable; the job fails
id=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"q\", \"sql\": $stubborn_json, \"timeout\": 1}]}") || fail submit
wait_for 10 running 1 || fail "the sql step did not start"
wait_for 10 job_ended "$id" || fail "step timeout: job $id is $(job_status "$id") 10 s after a 1 s step timeout"
[[ $(job_status "$id") == failed ]] || fail "step timeout: job $id is $(job_status "$id"), expected failed"
[[ $(sql "SELECT error->>'reason' FROM bgexec.job WHERE id = $id") == step_timeout ]] \
  || fail "step timeout: error $(sql "SELECT error FROM bgexec.job WHERE id = $id")"
wait_for 5 running 0 || fail "step timeout: the statement runs on"
[[ $(sql "SELECT count(*) FROM rounds") == 0 ]] || fail "step timeout: the statement's transaction committed"
grep -q 'sql step statement still running after its cancel; session closed' "$E2E_DIR/w1.log" \
  || fail "no log line for the closed session"

# stop: the job ends cancelled
id=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"q\", \"sql\": $stubborn_json}]}") || fail submit
wait_for 10 running 1 || fail "the sql step did not start"
"$BGEXEC" stop "$id" >/dev/null || fail stop
wait_for 10 job_ended "$id" || fail "stop: job $id is $(job_status "$id") 10 s after its stop"
[[ $(job_status "$id") == cancelled ]] || fail "stop: job $id is $(job_status "$id"), expected cancelled"
[[ $(sql "SELECT data->'error'->>'reason' FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed'") == stopped ]] \
  || fail "stop: step_failed $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed'")"
wait_for 5 running 0 || fail "stop: the statement runs on"
[[ $(sql "SELECT count(*) FROM rounds") == 0 ]] || fail "stop: the statement's transaction committed"

# a statement that ends on its cancel is not affected: no session closed
closed=$(grep -c 'session closed' "$E2E_DIR/w1.log")
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "q", "sql": "SELECT pg_sleep(30)", "timeout": 1}]}') || fail submit
wait_status "$id" failed 10
[[ $(grep -c 'session closed' "$E2E_DIR/w1.log") == "$closed" ]] || fail "a session closed for a statement that ended on its cancel"

# the worker carries on
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "q", "sql": "SELECT 1 AS one"}]}') || fail submit
wait_status "$id" completed 10
[[ $(sql "SELECT result->'q'->0->>'one' FROM bgexec.job WHERE id = $id") == 1 ]] || fail "result"
kill -TERM "$PID_w1"; wait "$PID_w1" || fail "w1 exit status $?"

# a drain: past --grace the worker ends the step and exits (it waited for
# the statement for ever), the job queued again for its next attempt
start_worker w2 --lease 10 --kill-grace 0.5 --grace 1
id=$("$BGEXEC" submit workflow --max-attempts 2 "{\"steps\": [{\"id\": \"q\", \"sql\": $stubborn_json}]}") || fail submit
wait_for 10 running 1 || fail "drain: the sql step did not start"
kill -TERM "$PID_w2"
exited() { ! kill -0 "$PID_w2" 2>/dev/null; }
wait_for 10 exited || fail "drain: w2 still runs 10 s after SIGTERM with --grace 1"
wait "$PID_w2" || fail "w2 exit status $?"
[[ $(job_status "$id") == queued ]] || fail "drain: job $id is $(job_status "$id"), expected queued"
[[ $(sql "SELECT data->'error'->>'reason' FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed'") == worker_shutdown ]] \
  || fail "drain: step_failed $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed'")"
wait_for 5 running 0 || fail "drain: the statement runs on"
[[ $(sql "SELECT count(*) FROM rounds") == 0 ]] || fail "drain: the statement's transaction committed"
ok

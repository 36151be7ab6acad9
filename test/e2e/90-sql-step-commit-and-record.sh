#!/usr/bin/env bash
# A sql step's writes and the record that it is done (its step_completed)
# commit together.  The record was written after the step's COMMIT, on the
# worker's own session: a worker lost in between (kill -9 here, while a
# client's transaction holds the job's row and the record waits for it)
# left the step's insert committed and no step_completed, and the job's
# next attempt ran the statement again: two rows.  Now the record is
# written in the step's transaction (bgexec._step_completed), so the lost
# worker's step commits nothing, and the next attempt's does, once.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58009
sql "CREATE TABLE t (x int, at timestamptz DEFAULT clock_timestamp()); GRANT ALL ON t TO PUBLIC" >/dev/null
start_worker w1 --lease 4

payload='{"steps": [
  {"id": "a", "sql": "WITH s AS (SELECT pg_sleep(2)) INSERT INTO t (x) SELECT 7 FROM s RETURNING x"},
  {"id": "b", "needs": ["a"], "sql": "SELECT $1::int + 1 AS y", "params": ["{{steps.a.output.0.x}}"]}]}'
id=$("$BGEXEC" submit workflow --max-attempts 2 "$payload") || fail submit
running() { [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(2)%' AND pid <> pg_backend_pid()") == 1 ]]; }
wait_for 15 running || fail "step a's statement did not start ($(job_status "$id"))"

# A client holds the job's row (as a stop() in a transaction left open
# would) while the step's statement ends.
hold_open
hold "SELECT 'row', id FROM bgexec.job WHERE id = $id FOR UPDATE;"
wait_for 10 held row || fail "the test's session did not lock job $id's row: $(cat "$E2E_DIR/hold.out")"
# The step is done with its statement: its insert committed and the
# worker's record waits for the row (before), or its record waits for the
# row in the step's own transaction (now).
waiting() {
  [[ $(sql "SELECT count(*) FROM t") == 1 ]] ||
    [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bgexec worker sql-step'
                AND wait_event_type = 'Lock'") == 1 ]]
}
wait_for 15 waiting || fail "step a did not reach its record ($(job_status "$id"))"
kill -9 "$PID_w1"
wait_for 10 gone "$PID_w1" || fail "worker w1 did not die"
# Longer than append_events' lock_timeout (500 ms): the dead worker's
# append in flight, if any, gives up as it would have retried.
sleep 1.5
hold "COMMIT;"
exec 7>&-

start_worker w2 --lease 4
wait_for 60 job_ended "$id" || fail "job $id is $(job_status "$id") a minute after its worker was killed"
[[ $(job_status "$id") == completed ]] || fail "job $id is $(job_status "$id"): $(sql "SELECT error FROM bgexec.job WHERE id = $id")"
rows=$(sql "SELECT count(*) FROM t")
[[ $rows == 1 ]] || fail "step a's insert committed $rows times: $(sql "SELECT string_agg(at::text, ', ') FROM t")
  events: $(sql "SELECT string_agg(seq || ' ' || kind || coalesce(' ' || (data->>'step'), ''), '; ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $id")"
[[ $(sql "SELECT result->'b'->0->>'y' FROM bgexec.job WHERE id = $id") == 8 ]] \
  || fail "step b read no output of a: result $(sql "SELECT result FROM bgexec.job WHERE id = $id")"
# One step_completed for a, in the attempt that committed it; the log gapless.
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_completed' AND data->>'step' = 'a'") == 1 ]] \
  || fail "step a has not one step_completed"
[[ $(sql "SELECT max(seq) = count(*) AND min(seq) = 1 FROM bgexec.job_event WHERE job_id = $id") == t ]] \
  || fail "job $id's event log has a gap"
echo "# events: $(sql "SELECT string_agg(seq || ' ' || kind || coalesce(' ' || (data->>'step'), ''), '; ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $id")"
ok "a sql step whose worker was lost before its record commits nothing; the next attempt's insert commits once"

# An ordinary run: the record is written in the step's transaction, and
# the worker's own appends after it (step b's) follow it in order.
id=$("$BGEXEC" submit workflow "$payload") || fail submit
wait_for 30 job_ended "$id" || fail "job $id is $(job_status "$id")"
[[ $(job_status "$id") == completed ]] || fail "job $id is $(job_status "$id")"
[[ $(sql "SELECT string_agg(kind || coalesce(' ' || (data->>'step'), ''), '; ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $id") \
   == "started; step_started a; step_completed a; step_started b; step_completed b; completed" ]] \
  || fail "job $id's events: $(sql "SELECT string_agg(seq || ' ' || kind || coalesce(' ' || (data->>'step'), ''), '; ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $id")"
[[ $(sql "SELECT count(*) FROM t") == 2 ]] || fail "the second job's insert: $(sql "SELECT count(*) FROM t") rows"
ok "an ordinary run records each sql step once, in order"

# A COMMIT whose reply is lost (the proxy cuts the step's session once the
# COMMIT is through): the step and its record committed, and the worker
# asks the server (pg_xact_status) instead of failing the step.  It failed
# it, retryable: with one attempt the job ended failed though its insert
# had committed, and with more the statement ran again.
stop_worker() { kill "$1"; wait_for 20 gone "$1" || fail "worker $1 did not stop"; }
stop_worker "$PID_w2"
start_cut_proxy LOST-STEP-COMMIT commit
start_worker w3 --db "$PROXIED" --lease 4
cut='{"steps": [{"id": "a", "sql": "INSERT INTO t (x) SELECT 9 /* LOST-STEP-COMMIT */ RETURNING x"}]}'
id=$("$BGEXEC" submit workflow "$cut") || fail submit
wait_for 30 job_ended "$id" || fail "job $id is $(job_status "$id")"
wait_for 10 test -f "$E2E_DIR/cut" || fail "the proxy never cut the step's session (marker not seen)"
[[ $(job_status "$id") == completed ]] \
  || fail "job $id is $(job_status "$id") after its step's COMMIT reply was lost: $(sql "SELECT error FROM bgexec.job WHERE id = $id")"
[[ $(sql "SELECT count(*) FROM t WHERE x = 9") == 1 ]] || fail "the insert committed $(sql "SELECT count(*) FROM t WHERE x = 9") times"
[[ $(sql "SELECT string_agg(kind || coalesce(' ' || (data->>'step'), ''), '; ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $id") \
   == "started; step_started a; step_completed a; completed" ]] \
  || fail "job $id's events: $(sql "SELECT string_agg(seq || ' ' || kind || coalesce(' ' || (data->>'step'), ''), '; ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $id")"
ok "a sql step whose COMMIT reply was lost is done, once"

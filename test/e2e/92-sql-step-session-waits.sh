#!/usr/bin/env bash
# A sql step whose session the server refuses for now (the worker role's
# CONNECTION LIMIT: 53300, too many connections for role) waits for one and
# runs then: its statement never ran, so nothing is counted.  It failed the
# step at once, a max_attempts 1 job with it, and said SQLSTATE 08006.
# The worker's own four connections fill the role's limit of 4.
# (3): a sql step waiting for a --sql-steps session ends with the step.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58011
sql "CREATE ROLE wk LOGIN CONNECTION LIMIT 4; GRANT bgexec_worker TO wk;
     CREATE ROLE e2e_alice LOGIN IN ROLE bgexec_client; GRANT e2e_alice TO wk" >/dev/null
start_worker w1 --lease 6 --db "user=wk dbname=postgres"
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/w1.log" || fail "worker did not start"
backends() { sql "SELECT count(*) FROM pg_stat_activity WHERE usename = 'wk'"; }
four() { [[ $(backends) == 4 ]]; }
wait_for 20 four || fail "the worker has $(backends) connections, expected 4"

as_alice="host=$PGHOST port=$PGPORT dbname=postgres user=e2e_alice"
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "q", "sql": "SELECT 41 + 1 AS x"}]}' --max-attempts 1 \
  --db "$as_alice") || fail submit
waiting() { grep -q "msg=\"sql step session cannot be opened, waiting for one\" job_id=$id .*sqlstate=53300" "$E2E_DIR/w1.log"; }
wait_for 15 waiting || fail "no wait logged with the server's SQLSTATE (job $id: $(sql "SELECT status, error FROM bgexec.job WHERE id = $id"))"
sleep 4  # longer than a lease: heartbeats keep it
[[ $(sql "SELECT status || ' ' || attempt FROM bgexec.job WHERE id = $id") == "running 1" ]] \
  || fail "job $id, waiting for its session: $(sql "SELECT status, attempt, error FROM bgexec.job WHERE id = $id")"

sql "ALTER ROLE wk CONNECTION LIMIT -1" >/dev/null
wait_status "$id" completed 30
[[ $(sql "SELECT result->'q'->0->>'x' FROM bgexec.job WHERE id = $id") == 42 ]] \
  || fail "job $id's result: $(sql "SELECT result FROM bgexec.job WHERE id = $id")"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed'") == 0 ]] \
  || fail "the step failed: $(sql "SELECT kind, data FROM bgexec.job_event WHERE job_id = $id")"

# (2) The same through a conninfo naming several servers (each tried in
# turn, as libpq does): the last refusal's SQLSTATE is the one said.
kill "$PID_w1"; wait "$PID_w1" 2>/dev/null
# w1's backends gone first: one still exiting counted among the four, and
# w2's step then got the slot it left (seen here).
none() { [[ $(backends) == 0 ]]; }
wait_for 20 none || fail "worker w1's $(backends) connections outlived it"
sql "ALTER ROLE wk CONNECTION LIMIT 4" >/dev/null
start_worker w2 --lease 6 --db "host=$PGHOST,$PGHOST port=$PGPORT,$PGPORT user=wk dbname=postgres"
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/w2.log" || fail "worker w2 did not start"
wait_for 20 four || fail "worker w2 has $(backends) connections, expected 4"
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "q", "sql": "SELECT 41 + 2 AS x"}]}' --max-attempts 1 \
  --db "$as_alice") || fail submit
waiting2() { grep -q "msg=\"sql step session cannot be opened, waiting for one\" job_id=$id .*sqlstate=53300" "$E2E_DIR/w2.log"; }
wait_for 15 waiting2 || fail "no wait logged with the server's SQLSTATE by w2 (job $id: $(grep "job_id=$id" "$E2E_DIR/w2.log" | tail -2))"
sql "ALTER ROLE wk CONNECTION LIMIT -1" >/dev/null
wait_status "$id" completed 30

# (3) A sql step waiting for one of the worker's --sql-steps sessions ends
# with the step, as one waiting for a step process does (the same wait,
# Job::await_slot, ended by the step's killer; it looked every 20 ms),
# while another job holds the one session for a minute: its timeout counts
# (it times out never started), and a stop ends the job's waiting steps
# (cancelled, never started).  Once that job is stopped, its session is
# free for the next.
kill "$PID_w2"; wait "$PID_w2" 2>/dev/null
sql "CREATE TABLE t92 (step text); GRANT ALL ON t92 TO PUBLIC" >/dev/null
start_worker w3 --lease 6 --sql-steps 1
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/w3.log" || fail "worker w3 did not start"
holder=$("$BGEXEC" submit workflow '{"steps": [{"id": "a", "sql": "SELECT pg_sleep(60) /* e2e92-long */"}]}' \
  --max-attempts 1) || fail submit
long_runs() { [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(60) /* e2e92-long */%' AND state = 'active'") == 1 ]]; }
wait_for 20 long_runs || fail "job $holder's statement did not start ($(job_status "$holder"))"
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "b", "sql": "INSERT INTO t92 VALUES ($$b$$)", "timeout": 1}]}' \
  --max-attempts 1) || fail submit
wait_status "$id" failed 20
[[ $(sql "SELECT data->'error'->>'reason' FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed'") == step_timeout ]] \
  || fail "the waiting sql step: $(sql "SELECT string_agg(kind || ' ' || data::text, ', ') FROM bgexec.job_event WHERE job_id = $id")"
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "b", "sql": "INSERT INTO t92 VALUES ($$b$$)"},
  {"id": "c", "sql": "INSERT INTO t92 VALUES ($$c$$)"}]}' --max-attempts 1) || fail submit
steps_wait() { [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_started'") == 2 ]]; }
wait_for 20 steps_wait || fail "job $id's steps did not start waiting ($(job_status "$id"))"
"$BGEXEC" stop "$id" >/dev/null || fail stop
wait_status "$id" cancelled 20
[[ $(sql "SELECT count(*) FILTER (WHERE data->'error'->>'reason' = 'stopped') || '/' || count(*) FROM bgexec.job_event
          WHERE job_id = $id AND kind = 'step_failed'") == 2/2 ]] \
  || fail "the steps' closing events: $(sql "SELECT string_agg(data::text, ', ') FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed'")"
[[ $(job_status "$holder") == running ]] || fail "job $holder, holding the session: $(job_status "$holder")"
"$BGEXEC" stop "$holder" >/dev/null || fail stop
wait_status "$holder" cancelled 20
[[ $(sql "SELECT count(*) FROM t92") == 0 ]] || fail "a waiting step ran: $(sql "SELECT string_agg(step, ' ') FROM t92")"
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "q", "sql": "SELECT 41 + 3 AS x"}]}' --max-attempts 1) || fail submit
wait_status "$id" completed 30
ok

#!/usr/bin/env bash
# A sql step runs as the job's owner and stays that role: the worker's login
# may become every tenant (and here is a superuser), so the owner's statement
# must not be able to SET ROLE, set_config('role') or RESET ROLE its way to
# another tenant's jobs or to the worker's own role.  Nor can it stall the
# worker with a COPY to or from the client, or fill its memory with rows.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57957
sql "CREATE ROLE e2e_alice LOGIN IN ROLE bgexec_client; CREATE ROLE e2e_bob LOGIN IN ROLE bgexec_client" >/dev/null
start_worker w1 --lease 10  # nothing here is about leases: no heartbeat cut short on a loaded machine
as_alice="host=$PGHOST port=$PGPORT dbname=postgres user=e2e_alice"
as_bob="host=$PGHOST port=$PGPORT dbname=postgres user=e2e_bob"

bob_job=$("$BGEXEC" submit noop '{"secret": "bob-only"}' --db "$as_bob") || fail "bob's submit"
wait_status "$bob_job" completed 20

# the step sees its owner, and may act within its rights
ok_id=$("$BGEXEC" submit workflow '{"steps": [{"id": "who", "sql": "SELECT current_user AS u, session_user AS s"}]}' \
  --db "$as_alice") || fail "alice's submit"
wait_status "$ok_id" completed 20
[[ $(sql "SELECT result->'who'->0->>'u' FROM bgexec.job WHERE id = $ok_id") == e2e_alice ]] \
  || fail "the step did not run as its owner: $(sql "SELECT result FROM bgexec.job WHERE id = $ok_id")"

# sql_step_fails STATEMENT PATTERN: alice's one-step workflow fails, its
# error message matching PATTERN.
sql_step_fails() {
  local payload id msg
  payload=$(jq -cn --arg s "$1" '{steps: [{id: "x", sql: $s}]}')
  id=$("$BGEXEC" submit workflow "$payload" --db "$as_alice") || fail "submit $1"
  wait_status "$id" failed 20
  msg=$(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $id")
  [[ $msg == $2 ]] || fail "$1: $msg"
}

# each way out of the role fails the step, and nothing of bob's is read
for stmt in \
  "SELECT set_config('role', 'e2e_bob', true) AS r, (SELECT count(*) FROM bgexec.job WHERE id = $bob_job) AS n" \
  "SELECT set_config('role', 'none', true) AS r, (SELECT count(*) FROM bgexec.job WHERE id = $bob_job) AS n" \
  "DO \$\$BEGIN EXECUTE 'RESET ROLE'; END\$\$" \
  "DO \$\$BEGIN EXECUTE 'SET ROLE postgres'; END\$\$" \
  "DO \$\$BEGIN EXECUTE 'SET SESSION AUTHORIZATION postgres'; END\$\$"; do
  sql_step_fails "$stmt" '*cannot set parameter*within security-definer function*'
done
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE owner = 'e2e_alice' AND result::text LIKE '%bob-only%'") == 0 ]] \
  || fail "alice's step read bob's job"

# A COPY to or from the client fails its step; libpq hands the COPY result
# back for ever, and the worker spun on it (no heartbeat, no signal handled).
sql "CREATE TABLE e2e_sink (n int); GRANT INSERT ON e2e_sink TO e2e_alice" >/dev/null
for stmt in "COPY (SELECT 1) TO STDOUT" "COPY e2e_sink FROM STDIN"; do
  sql_step_fails "$stmt" '*COPY to or from the client is not supported*0A000*'
done
# Rows past 16 MiB fail the step (54000) instead of being held whole by the
# worker, and what the statement wrote is rolled back.
sql_step_fails "WITH w AS (INSERT INTO e2e_sink VALUES (7)) SELECT repeat('x', 1048576) AS big FROM generate_series(1, 64)" \
  '*over 16777216 bytes*54000*'
[[ $(sql "SELECT count(*) FROM e2e_sink WHERE n = 7") == 0 ]] || fail "the oversized step's insert was committed"
# ... counted as JSON text: a million one-byte rows are 11 MB of output,
# not 1 MB (the worker held them in 2.9 GB before failing another way)
sql_step_fails "SELECT NULL::int AS a FROM generate_series(1, 2000000)" '*over 16777216 bytes as JSON*54000*'
# A value nested past 510 levels fails the step, named (its rows, an array
# of objects, nest past 512); 100 000 deep crashed the worker copying it.
sql_step_fails "SELECT (repeat('[', 511) || repeat(']', 511))::json AS deep" \
  '*column "deep" nests deeper than 510 levels*54000*'
# Two columns of one name fail the step, named: a row is a JSON object, and
# the second's value was kept alone (SELECT 1, 2 lost a ?column?)
sql_step_fails "WITH w AS (INSERT INTO e2e_sink VALUES (8)) SELECT 1 AS x, 2 AS x" \
  '*column "x" appears twice in the result*name each column (AS)*42701*'
[[ $(sql "SELECT count(*) FROM e2e_sink WHERE n = 8") == 0 ]] || fail "the duplicate-column step's insert was committed"
sql_step_fails "SELECT 1, 2" '*column "?column?" appears twice*42701*'
# The message is the server's text, its DETAIL, HINT and CONTEXT after it:
# no libpq "ERROR:  ", no statement quoted back under "LINE 1:", no
# connection name before the worker's own errors
sql_step_fails "SELECT 1/0 AS x" 'sql: division by zero (SQLSTATE 22012)'
sql_step_fails "SELECT * FROM e2e_nowhere" 'sql: relation "e2e_nowhere" does not exist (SQLSTATE 42P01)'
sql_step_fails "DO \$\$BEGIN RAISE EXCEPTION 'boom' USING DETAIL = 'd', HINT = 'h'; END\$\$" \
  'sql: boom DETAIL: d HINT: h CONTEXT: PL/pgSQL function inline_code_block line 1 at RAISE (SQLSTATE P0001)'
sql_step_fails "COPY (SELECT 1) TO STDOUT" 'sql: COPY to or from the client is not supported (SQLSTATE 0A000)'
# and the worker goes on
after=$("$BGEXEC" submit workflow '{"steps": [{"id": "x", "sql": "SELECT 1 AS one"}]}' --db "$as_alice")
wait_status "$after" completed 20
kill -0 "$PID_w1" || fail "worker died"
# --sql-steps bounds the sql step sessions a worker holds at once: a
# workflow of six parallel sql steps took six connections (a hundred took
# every connection the server had, every other client's too); with 2, the
# others wait for a session and all complete.
start_worker w2 --queue par --concurrency 4 --sql-steps 2 --lease 10
par=$("$BGEXEC" submit workflow --queue par "{\"steps\": [$(for i in 1 2 3 4 5 6; do
  printf '%s{"id": "s%d", "sql": "SELECT pg_sleep(0.7) /* e2e-par */"}' "$([[ $i == 1 ]] || echo ,)" "$i"; done)]}") \
  || fail submit
most=0 end=$((SECONDS + 60))
while [[ $(job_status "$par") != completed ]]; do
  n=$(sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(0.7) /* e2e-par */%' AND state = 'active'")
  ((n > most)) && most=$n
  ((SECONDS < end)) || fail "job $par is $(job_status "$par")"
  sleep 0.05
done
((most == 2)) || fail "sql step sessions at once: at most $most, expected 2"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $par AND kind = 'step_completed'") == 6 ]] \
  || fail "not every sql step completed"
# ... granted in the order asked: the steps complete two by two in the
# order they started (each waiter polled every 20 ms, and a freed session
# went to whichever polled first).
pairs() {  # the steps of KIND in seq order, two to a group: "s1 s2|s3 s4|s5 s6"
  sql "SELECT string_agg(p, '|' ORDER BY g) FROM (SELECT (n - 1) / 2 AS g, string_agg(step, ' ' ORDER BY step) AS p
         FROM (SELECT data->>'step' AS step, row_number() OVER (ORDER BY seq) AS n FROM bgexec.job_event
                WHERE job_id = $par AND kind = '$1') e GROUP BY 1) x"
}
[[ $(pairs step_completed) == "$(pairs step_started)" ]] \
  || fail "sessions not granted in order: started $(pairs step_started), completed $(pairs step_completed)"

# a statement given the wrong number of parameters (08P01, the server's
# protocol_violation) fails the same way every time: not retried
bad=$("$BGEXEC" submit workflow --max-attempts 3 '{"steps": [{"id": "q", "sql": "SELECT $1", "params": []}]}') || fail submit
wait_status "$bad" failed 30
[[ $(sql "SELECT attempt || ' ' || (error->>'retryable') FROM bgexec.job WHERE id = $bad") == "1 false" ]] \
  || fail "wrong parameter count: $(sql "SELECT attempt || ' ' || error::text FROM bgexec.job WHERE id = $bad")"

ok

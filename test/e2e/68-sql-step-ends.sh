#!/usr/bin/env bash
# How a sql step ends, where the mutation run of the daemon found no test:
# a statement that swallows the cancel its step timeout sends and returns
# normally does not COMMIT (the step timed out: its transaction is rolled
# back); a step whose session is lost mid-statement fails retryable, so a
# job with attempts left runs again and completes.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57936
sql "CREATE TABLE marks (n int)" >/dev/null
sql "CREATE FUNCTION catch_one() RETURNS int LANGUAGE plpgsql AS \$\$
     BEGIN BEGIN PERFORM pg_sleep(3); EXCEPTION WHEN query_canceled THEN NULL; END;
     INSERT INTO marks VALUES (1); RETURN 1; END \$\$" >/dev/null
start_worker w1 --lease 10 --kill-grace 2
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "q", "sql": "SELECT catch_one() AS r", "timeout": 1}]}') || fail submit
wait_for 20 job_ended "$id" || fail "job is $(job_status "$id")"
[[ $(sql "SELECT count(*) FROM marks") == 0 ]] || fail "the step's transaction committed after its timeout"
[[ $(job_status "$id") == failed ]] || fail "job is $(job_status "$id")"
ok "a sql step that caught its timeout's cancel did not commit"
id=$("$BGEXEC" submit workflow --max-attempts 3 '{"steps": [{"id": "q", "sql": "SELECT pg_sleep(2) AS s"}]}') || fail submit
running() { [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(2)%' AND pid <> pg_backend_pid()") == 1 ]]; }
wait_for 20 running || fail "statement did not start"
sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(2)%' AND pid <> pg_backend_pid()" >/dev/null
wait_for 40 job_ended "$id" || fail "job is $(job_status "$id")"
[[ $(job_status "$id") == completed ]] || fail "job is $(job_status "$id"): $(sql "SELECT error FROM bgexec.job WHERE id = $id")"
ok "a sql step whose session was lost ran again and completed"

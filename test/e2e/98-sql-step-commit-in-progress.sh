#!/usr/bin/env bash
# A sql step's COMMIT whose reply is lost while the server is still
# committing: the worker asks the server whether the step's transaction
# committed (pg_xact_status) and, while it is "in progress", asks again
# until it has ended (Job::committed).  e2e 90 cuts the session only once
# the COMMIT is through, so the first answer was already "committed": an
# "in progress" taken for "not committed" survived every test (round 53's
# mutation test, D09).  Here the proxy cuts the worker's side as soon as
# the COMMIT is sent, and a deferred constraint trigger makes that COMMIT
# take two seconds, so the first answer is "in progress".  Taken for "not
# committed", the step failed though its insert and its record committed:
# the job, with one attempt, ended failed; with two, the statement ran
# again.  Now the step is done, once.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58013
sql "CREATE TABLE t (x int, at timestamptz DEFAULT clock_timestamp()); GRANT ALL ON t TO PUBLIC;
     CREATE FUNCTION public.slow_commit() RETURNS trigger LANGUAGE plpgsql AS \$\$
       BEGIN PERFORM pg_sleep(2); RETURN NULL; END \$\$;
     CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON t DEFERRABLE INITIALLY DEFERRED
       FOR EACH ROW EXECUTE FUNCTION public.slow_commit()" >/dev/null
start_cut_proxy SLOW-STEP-END commit-sent
start_worker w1 --db "$PROXIED" --lease 4

# events ID: the job's events, "kind step" in seq order.
events() { sql "SELECT string_agg(kind || coalesce(' ' || (data->>'step'), ''), '; ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $1"; }
for attempts in 1 2; do
  rm -f "$E2E_DIR/cut"
  sql "TRUNCATE t" >/dev/null
  step='{"steps": [{"id": "a", "sql": "INSERT INTO t (x) SELECT 9 /* SLOW-STEP-END */ RETURNING x"}]}'
  id=$("$BGEXEC" submit workflow --max-attempts "$attempts" "$step") || fail submit
  wait_for 30 job_ended "$id" || fail "job $id is $(job_status "$id")"
  test -f "$E2E_DIR/cut" || fail "the proxy never cut the step's session (marker not seen)"
  [[ $(job_status "$id") == completed ]] \
    || fail "job $id (max_attempts $attempts) is $(job_status "$id") after its step's COMMIT reply was lost mid-commit: $(sql "SELECT error FROM bgexec.job WHERE id = $id")"
  [[ $(sql "SELECT count(*) FROM t WHERE x = 9") == 1 ]] \
    || fail "job $id (max_attempts $attempts): the insert committed $(sql "SELECT count(*) FROM t WHERE x = 9") times"
  [[ $(events "$id") == "started; step_started a; step_completed a; completed" ]] \
    || fail "job $id's events: $(events "$id")"
  [[ $(sql "SELECT result->'a'->0->>'x' FROM bgexec.job WHERE id = $id") == 9 ]] \
    || fail "job $id's result: $(sql "SELECT result FROM bgexec.job WHERE id = $id")"
  # The proxy cuts once: a new one for the next round.
  [[ $attempts == 2 ]] && break
  kill "$PID_w1"; wait_for 20 gone "$PID_w1" || fail "worker w1 did not stop"
  kill "${E2E_PIDS[0]}"; wait_for 10 gone "${E2E_PIDS[0]}" || fail "the proxy did not stop"
  start_cut_proxy SLOW-STEP-END commit-sent
  start_worker w1 --db "$PROXIED" --lease 4
done
ok "a sql step whose COMMIT reply was lost while the server was committing is done, once"

#!/usr/bin/env bash
# A worker's write that the server cancels (a DBA's pg_cancel_backend, a
# statement_timeout on the worker's role: 57014) is made again while the
# lease lasts, as after a lost connection; the job's outcome is not the
# write's.  A cancelled finish_many of a job whose action exited 0 made it
# `failed` ("canceling statement due to user request", retryable false),
# and a cancelled append_events of its step_completed failed the step: with
# max_attempts 2 the action ran twice, then the job failed.
# Each write is slowed here by a trigger (0.3 s), and a loop cancels every
# such statement of the worker for 4 s.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58010
cat >"$E2E_DIR/act.sh" <<SH
#!/bin/sh
cat >/dev/null
echo ran >>"$E2E_DIR/ran.log"
echo '{"ok": true}'
SH
chmod +x "$E2E_DIR/act.sh"
sql "CREATE FUNCTION public.slow_event() RETURNS trigger LANGUAGE plpgsql AS \$\$
       BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END \$\$;
     CREATE TRIGGER slow_event BEFORE INSERT ON bgexec.job_event FOR EACH ROW
       WHEN (NEW.kind IN ('step_completed', 'completed')) EXECUTE FUNCTION public.slow_event()" >/dev/null
start_worker w1 --lease 10 --action "act=$E2E_DIR/act.sh"
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/w1.log" || fail "worker did not start"

# cancel_for SECONDS APPLICATION_NAME FUNCTION: cancels, for SECONDS, every
# statement of that connection of the worker calling FUNCTION; the number
# cancelled in $E2E_DIR/cancelled.
cancel_for() {
  local end=$((SECONDS + $1)) n=0 c
  while ((SECONDS < end)); do
    c=$(sql "SELECT count(*) FILTER (WHERE pg_cancel_backend(pid)) FROM pg_stat_activity
             WHERE application_name = '$2' AND state = 'active' AND query LIKE '%$3%'")
    n=$((n + c))
    sleep 0.05
  done
  echo "$n" >"$E2E_DIR/cancelled"
}

# (1) The step's step_completed (append_events, control connection).
rm -f "$E2E_DIR/ran.log"
id=$("$BGEXEC" submit act '{}' --max-attempts 2) || fail submit
cancel_for 4 'bgexec worker control' append_events
(($(cat "$E2E_DIR/cancelled") > 0)) || fail "no append_events was cancelled (job $id: $(job_status "$id"))"
wait_status "$id" completed 30
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $id") == 1 ]] || fail "job $id took more than one attempt"
[[ $(wc -l <"$E2E_DIR/ran.log") == 1 ]] || fail "the action ran $(wc -l <"$E2E_DIR/ran.log") times"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed'") == 0 ]] \
  || fail "a step of job $id failed: $(sql "SELECT kind, data FROM bgexec.job_event WHERE job_id = $id")"
grep -q 'msg="database call failed, retrying".*sqlstate=57014' "$E2E_DIR/w1.log" || fail "no retry logged"

# (2) The finish (finish_many, finish connection).
rm -f "$E2E_DIR/ran.log"
id=$("$BGEXEC" submit act '{}' --max-attempts 1) || fail submit
cancel_for 4 'bgexec worker finish' finish_many
(($(cat "$E2E_DIR/cancelled") > 0)) || fail "no finish_many was cancelled (job $id: $(job_status "$id"))"
wait_status "$id" completed 30
[[ $(sql "SELECT result::text LIKE '%\"ok\": true%' FROM bgexec.job WHERE id = $id") == t ]] \
  || fail "job $id's result: $(sql "SELECT result, error FROM bgexec.job WHERE id = $id")"
[[ $(wc -l <"$E2E_DIR/ran.log") == 1 ]] || fail "the action ran $(wc -l <"$E2E_DIR/ran.log") times"
kill -0 "$PID_w1" || fail "worker exited"
ok

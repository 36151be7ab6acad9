#!/usr/bin/env bash
# kill -9 of a worker mid-step: an at-most-once job ends failed/worker_lost and
# its step never runs twice; a retry-safe job (max_attempts > 1) completes on
# another worker without re-running its completed steps.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57942
M=$E2E_DIR/marks
mkdir -p "$M"
chmod 777 "$M"
E2E_PIDFILES+=("$M/pids")

# --- at-most-once (max_attempts = 1)
# The step leaves three processes: its leader, a child in its process group
# and one that left the group (setsid).  A worker killed by SIGKILL cannot
# end them: its step guard does, so they do not run on beside whatever runs
# the job next.
start_worker a1 --allow-run
once=$("$BGEXEC" submit workflow "{\"steps\": [
  {\"id\": \"s\", \"run\": [\"sh\", \"-c\", \"echo \$\$ >> $M/pids; sleep 61 & echo \$! >> $M/pids; setsid sleep 62 & echo \$! >> $M/pids; echo run >> $M/once; wait\"]}]}") || fail submit
wait_for 20 test -s "$M/once" || fail "step did not start"
mapfile -t left <"$M/pids"
(( ${#left[@]} == 3 )) || fail "step processes: ${left[*]}"
gone "${left[@]}" && fail "step processes not running: ${left[*]}"
kill -KILL "$PID_a1"; wait "$PID_a1" 2>/dev/null || true
# The guard TERMs them at once, before the lease (2 s) has run out.
wait_for 5 gone "${left[@]}" || fail "step processes outlived their worker: $(ps -o pid,pgid,stat,args -p "${left[*]// /,}" | tail -n +2)"
start_worker b1 --allow-run
wait_status "$once" failed 40
[[ $(sql "SELECT error->>'reason' FROM bgexec.job WHERE id = $once") == worker_lost ]] || fail "error reason"
sleep 3  # give b1 a chance to (wrongly) run it again
[[ $(wc -l <"$M/once") == 1 ]] || fail "at-most-once step ran $(wc -l <"$M/once") times"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $once AND kind = 'worker_lost'") == 1 ]] || fail "worker_lost event"
kill -TERM "$PID_b1"; wait "$PID_b1" || true

# --- retry-safe (max_attempts = 3): s1 completes, s2 is interrupted
start_worker a2 --allow-run
safe=$("$BGEXEC" submit workflow --max-attempts 3 "{\"steps\": [
  {\"id\": \"s1\", \"run\": [\"sh\", \"-c\", \"echo run >> $M/s1; echo one\"]},
  {\"id\": \"s2\", \"needs\": [\"s1\"], \"run\": [\"sh\", \"-c\",
     \"echo \$\$ >> $M/pids; echo run >> $M/s2; if [ ! -e $M/flag ]; then touch $M/flag; exec sleep 60; fi; echo {{steps.s1.stdout}}-two\"]}]}") || fail submit
wait_for 20 test -e "$M/flag" || fail "s2 did not start"
kill -KILL "$PID_a2"; wait "$PID_a2" 2>/dev/null || true
start_worker b2 --allow-run
wait_status "$safe" completed 40
[[ $(wc -l <"$M/s1") == 1 ]] || fail "completed step s1 ran again"
[[ $(wc -l <"$M/s2") == 2 ]] || fail "s2 ran $(wc -l <"$M/s2") times, expected 2"
[[ $(sql "SELECT result->>'s2' FROM bgexec.job WHERE id = $safe") == one-two ]] || fail "result $(sql "SELECT result FROM bgexec.job WHERE id = $safe")"
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $safe") == 2 ]] || fail "attempt"
kill -TERM "$PID_b2"; wait "$PID_b2" || true

# --- a sql step of a killed worker: the server ends its statement within
# about a second (the step's session checks that its client is there)
# instead of running it on, holding its locks, beside the next attempt
stmt_running() {  # STATEMENT COUNT
  [[ $(sql "SELECT count(*) FROM pg_stat_activity
             WHERE query = '$1' AND pid <> pg_backend_pid()") == "$2" ]]
}
start_worker a3 --queue sqlq
"$BGEXEC" submit workflow --queue sqlq '{"steps": [{"id": "q", "sql": "SELECT pg_sleep(60) /* kill9-sql */"}]}' >/dev/null || fail submit
wait_for 20 stmt_running 'SELECT pg_sleep(60) /* kill9-sql */' 1 || fail "sql step did not start"
kill -KILL "$PID_a3"; wait "$PID_a3" 2>/dev/null || true
wait_for 10 stmt_running 'SELECT pg_sleep(60) /* kill9-sql */' 0 || fail "the sql step's statement outlived its worker"

# --- a sql step of a worker that stops answering (SIGSTOP: a frozen host, a
# partition): idle in its transaction after the statement, waiting for a
# COMMIT that cannot come, the session ends within a lease (9 s here), and
# the step's locks with it.  (The stop must land within the statement's 3 s;
# the lease's expiry, 6 s at least after the stop, ends the session too,
# through reconcile: the idle state is there to be seen for 3 s at least.)
stmt_in() {  # STATE COUNT
  [[ $(sql "SELECT count(*) FROM pg_stat_activity
             WHERE query = 'SELECT pg_sleep(3) /* stop-sql */' AND pid <> pg_backend_pid()
               AND ('$1' = 'any' OR state = '$1')") == "$2" ]]
}
start_worker a4 --queue sqlq4 --lease 9
"$BGEXEC" submit workflow --queue sqlq4 '{"steps": [{"id": "q", "sql": "SELECT pg_sleep(3) /* stop-sql */"}]}' >/dev/null || fail submit
wait_for 20 stmt_in active 1 || fail "sql step did not start"
kill -STOP "$PID_a4"
wait_for 10 stmt_in 'idle in transaction' 1 || fail "the stopped worker's step was not left idle in its transaction"
wait_for 20 stmt_in any 0 || fail "the stopped worker's step held its transaction open"
kill -CONT "$PID_a4"
kill -TERM "$PID_a4"; wait "$PID_a4" || true

# --- the same worker stopped mid-statement: the server's connection check
# sees a live socket and the worker cannot cancel, so the statement would
# run its minute beside the job's next attempt; reconcile, taking the lease
# back, ends the step's session (rolled back)
start_worker a6 --queue sqlq6
frozen_sql=$("$BGEXEC" submit workflow --queue sqlq6 '{"steps": [{"id": "q", "sql": "SELECT pg_sleep(60) /* frozen-sql */"}]}') || fail submit
wait_for 20 stmt_running 'SELECT pg_sleep(60) /* frozen-sql */' 1 || fail "sql step did not start"
kill -STOP "$PID_a6"
reconciled() { sql "SELECT bgexec.reconcile()" >/dev/null && stmt_running 'SELECT pg_sleep(60) /* frozen-sql */' 0; }
wait_for 15 reconciled || fail "the stopped worker's sql statement ran on after reconcile took its lease back"
[[ $(job_status "$frozen_sql") == failed ]] || fail "job $frozen_sql is $(job_status "$frozen_sql"), expected failed"
grep -q "terminating the sql step session (pid [0-9]*) of job $frozen_sql" "$E2E_DIR/pg/postgres.log" \
  || fail "no server log line for the ended sql step session"
kill -CONT "$PID_a6"
kill -TERM "$PID_a6"; wait "$PID_a6" || true

# --- a run step of a worker that stops (SIGSTOP: a debugger, a frozen event
# loop; its guard's pipe stays open): the guard stops the step once the
# worker has not renewed the lease in time, before the lease has run out on
# the database, so the job's next attempt never runs beside it.  Continued,
# the worker writes nothing more for the job and carries on.
start_worker a5 --allow-run --queue stopq
frozen=$("$BGEXEC" submit workflow --queue stopq --max-attempts 2 "{\"steps\": [
  {\"id\": \"s\", \"run\": [\"sh\", \"-c\",
     \"echo \$\$ >> $M/fpids; echo run >> $M/frozen; if [ ! -e $M/fflag ]; then touch $M/fflag; sleep 61 & echo \$! >> $M/fpids; wait; fi\"]}]}") || fail submit
E2E_PIDFILES+=("$M/fpids")
wait_for 20 test -e "$M/fflag" || fail "step did not start"
fpids_two() { [[ $(wc -l <"$M/fpids") -ge 2 ]]; }
wait_for 10 fpids_two || fail "the step's sleep did not start"
mapfile -t left <"$M/fpids"
(( ${#left[@]} == 2 )) || fail "step processes: ${left[*]}"
kill -STOP "$PID_a5"
# The lease as the database has it now: a heartbeat still in flight can only
# push it later, and the worker fences its steps by the heartbeats it saw,
# so this is a bound the guard must keep (read at once: once the lease runs
# out the watchdog takes it back and the column is cleared).
expires=$(sql "SELECT extract(epoch FROM lease_expires_at) FROM bgexec.job WHERE id = $frozen")
[[ -n $expires ]] || fail "job $frozen has no lease: $(job_status "$frozen")"
wait_for 5 gone "${left[@]}" || fail "the stopped worker's step processes ran on"
# When the guard had them stopped: its log line, written once they are gone
# (ts= to the millisecond, cut: a millisecond on), not when this test saw it.
guard_line() { grep 'worker did not renew its leases in time: their steps were stopped' "$E2E_DIR/a5.log"; }
wait_for 10 guard_line || fail "no guard log line"
ts=$(guard_line | head -1 | sed -n 's/^ts=\([^ ]*\) .*/\1/p')
stopped=$(date -d "$ts" +%s.%N) || fail "the guard's log line has no time: $(guard_line)"
awk -v s="$stopped" -v e="$expires" 'BEGIN { exit !(s + 0.001 < e) }' \
  || fail "the step processes outlived the lease (stopped at $stopped, lease until $expires)"
echo "# the guard stopped the steps $(awk -v s="$stopped" -v e="$expires" 'BEGIN { printf "%.3f", e - s }') s before the lease ran out" >&2
start_worker b5 --allow-run --queue stopq
wait_status "$frozen" completed 40
[[ $(wc -l <"$M/frozen") == 2 ]] || fail "the step ran $(wc -l <"$M/frozen") times, expected 2"
kill -CONT "$PID_a5"
sleep 1
kill -0 "$PID_a5" || fail "the continued worker exited"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $frozen AND kind = 'step_failed'") == 0 ]] || fail "a step_failed event"
id=$("$BGEXEC" submit noop --queue stopq) || fail submit
wait_status "$id" completed 30
kill -TERM "$PID_a5" "$PID_b5"; wait "$PID_a5" || fail "a5 exit status $?"

# --- the same with a job timeout far inside the lease (30 s here): at the
# deadline reconcile() makes the job timed_out, and a retry may start it
# again at once.  The guard stops the frozen worker's step a kill grace
# (0.5 s) and a tick after the deadline; it ran on until the lease's fence.
start_worker a7 --allow-run --queue tq --lease 30
timed=$("$BGEXEC" submit workflow --queue tq --timeout 3 "{\"steps\": [
  {\"id\": \"s\", \"run\": [\"sh\", \"-c\", \"echo \$\$ >> $M/tpids; sleep 63 & echo \$! >> $M/tpids; wait\"]}]}") || fail submit
E2E_PIDFILES+=("$M/tpids")
two_pids() { [[ $(wc -l <"$M/tpids") -ge 2 ]]; }
wait_for 20 two_pids || fail "step did not start"
mapfile -t tleft <"$M/tpids"
kill -STOP "$PID_a7"
timed_out() { sql "SELECT bgexec.reconcile()" >/dev/null && status_is "$timed" timed_out; }
wait_for 10 timed_out || fail "job $timed is $(job_status "$timed"), expected timed_out"
wait_for 5 gone "${tleft[@]}" || fail "a frozen worker's step ran on past its job's deadline (lease 30 s)"
kill -CONT "$PID_a7"
kill -TERM "$PID_a7"; wait "$PID_a7" || true

# --- the database gives out again a job whose earlier run the worker still
# holds (its lease taken back by hand here; a duplicate worker id's unclaim
# did it): the earlier run is abandoned and the new one starts once its
# steps are gone, never beside them.  (Its entry was replaced, and the
# earlier run's end removed the new run's: no heartbeat, no lease guard.)
# The earlier run's step ignores TERM, so it lives until the KILL after the
# kill grace: a new run that did not wait for it would start beside it (with
# a step that died on the first TERM, a run that did not wait passed too).
start_worker a8 --allow-run --queue rq --concurrency 2 --kill-grace 0.6
again=$("$BGEXEC" submit workflow --queue rq --max-attempts 3 "{\"steps\": [
  {\"id\": \"s\", \"run\": [\"sh\", \"-c\",
     \"echo \$\$ >> $M/rpids; if [ \$(wc -l < $M/rpids) -gt 1 ]; then kill -0 \$(head -1 $M/rpids) 2>/dev/null && echo overlap >> $M/roverlap; exit 0; fi; trap '' TERM; while :; do sleep 0.05; done\"]}]}") || fail submit
E2E_PIDFILES+=("$M/rpids")
wait_for 20 test -s "$M/rpids" || fail "step did not start"
sql "UPDATE bgexec.job SET status = 'queued', lease = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE id = $again" >/dev/null
sql "SELECT bgexec._jobs_ready('rq', 1)" >/dev/null
wait_status "$again" completed 20
[[ ! -e $M/roverlap ]] || fail "the job's new run started beside its earlier run's step"
grep -q 'job claimed again while an earlier run of it is here' "$E2E_DIR/a8.log" || fail "no log line for the earlier run"
# the new run's entry was kept: the worker goes on heartbeating, claiming
id=$("$BGEXEC" submit workflow --queue rq '{"steps": [{"id": "s", "sleep": 3}]}') || fail submit
wait_status "$id" completed 20
kill -0 "$PID_a8" || fail "a8 died"
kill -TERM "$PID_a8"; wait "$PID_a8" || true

# queue_stats' terminal counts (kept by finish_many, reconcile and retry as
# deltas) equal a count of the jobs after all of the above (one statement,
# one snapshot)
counts=$(sql "SELECT format('%s/%s/%s %s/%s/%s', s.completed, s.failed, s.cancelled,
    count(*) FILTER (WHERE j.status = 'completed'), count(*) FILTER (WHERE j.status = 'failed'),
    count(*) FILTER (WHERE j.status = 'cancelled'))
  FROM bgexec.queue_stats s JOIN bgexec.job j ON j.queue = s.queue
 WHERE s.queue = 'default' GROUP BY s.completed, s.failed, s.cancelled")
read -r shown actual <<<"$counts"
[[ $shown == "$actual" ]] || fail "queue_stats completed/failed/cancelled $shown, jobs $actual"
[[ $shown != 0/* && $shown != */0/* ]] || fail "expected completed and failed jobs: $shown"
ok

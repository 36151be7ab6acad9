#!/usr/bin/env bash
# The in-server watchdog's edges (extension/watchdog.c), from a mutation
# test that 09-watchdog left alive: a database it serves without the
# extension is idle, not an error a tick; bgexec.retention = 0 purges a
# terminal job at once (0 is a retention, -1 is off); a cancel
# (pg_cancel_backend) between ticks is dropped, the process stays; a
# reconcile() that fails every tick is logged with exponential backoff, not
# every interval, and retention still runs in those ticks; once reconcile()
# works again the watchdog takes leases back.  No daemon runs.
source "$(dirname "$0")/lib.sh"
cluster_start "$E2E_DIR/pg" 58000 "$E2E_FSYNC" "bgexec.database = 'jobs, noext'" \
  "bgexec.watchdog_interval = '200ms'" "bgexec.retention = 0" >/dev/null || fail "cluster did not start"
LOG=$E2E_DIR/pg/postgres.log
psql -qX -d postgres -c "CREATE DATABASE jobs" >/dev/null
psql -qX -d postgres -c "CREATE DATABASE noext" >/dev/null
export PGDATABASE=jobs
sql "CREATE EXTENSION bgexec" >/dev/null
watchdog_pid() { sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'bgexec watchdog' AND datname = '$1'"; }
watchdogs_up() { [[ -n $(watchdog_pid jobs) && -n $(watchdog_pid noext) ]]; }
wait_for 30 watchdogs_up || fail "the watchdogs of jobs and noext are not connected"
[[ ${#E2E_PIDS[@]} -eq 0 ]] || fail "no daemon may run in this test"

# Retention 0: a job finished now is purged by the next ticks.
j=$(sql "SELECT bgexec.submit('noop', queue => 'wd')")
sql "SELECT bgexec.stop($j)" >/dev/null
purged() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE id = $1") == 0 ]]; }
wait_for 20 purged "$j" || fail "bgexec.retention = 0 did not purge a cancelled job"

# Two seconds (ten ticks each) of both watchdogs: no ERROR in the log (the
# one in noext, without the extension, is idle).
sleep 2
! grep -q 'ERROR' "$LOG" || fail "errors logged: $(grep ERROR "$LOG" | head -3)"

# Cancels between ticks are dropped: the same process serves jobs after.
pid=$(watchdog_pid jobs)
for _ in 1 2 3 4 5; do
  sql "SELECT pg_cancel_backend($pid)" >/dev/null
  sleep 0.3
done
sleep 1
[[ $(watchdog_pid jobs) == "$pid" ]] || fail "the watchdog ended on a cancel (pid $pid, now '$(watchdog_pid jobs)')"

# reconcile() broken (renamed away): every tick fails.  Over 6 s, with the
# backoff (200 ms doubled per failed tick: ticks at 0, 0.4, 1.2, 2.8, 6 s)
# about 5 errors; without it 30.  Retention still runs in those ticks.
sql "ALTER FUNCTION bgexec.reconcile() RENAME TO reconcile_away" >/dev/null
broken() { grep -c 'function bgexec.reconcile() does not exist' "$LOG" || true; }
broken_seen() { (($(broken) > 0)); }
wait_for 20 broken_seen || fail "no error logged for the broken reconcile()"
j=$(sql "SELECT bgexec.submit('noop', queue => 'wd')")
sql "SELECT bgexec.stop($j)" >/dev/null
wait_for 20 purged "$j" || fail "retention did not run while reconcile() failed"
n0=$(broken)
sleep 6
n=$(( $(broken) - n0 ))
((n <= 12)) || fail "$n errors logged in 6 s: no backoff"

# Repaired: the watchdog takes an expired lease back (within the backoff's
# cap, 60 s, at most).
sql "ALTER FUNCTION bgexec.reconcile_away() RENAME TO reconcile" >/dev/null
lost=$(sql "SELECT bgexec.submit('noop', queue => 'wd')")
[[ $(sql "SELECT count(*) FROM bgexec.claim('ghost', '{wd}', 1, '1 second')") == 1 ]] || fail "claim"
wait_for 75 purged "$lost" || fail "the watchdog did not recover after reconcile() was repaired: $(job_status "$lost")"
[[ $(watchdog_pid jobs) == "$pid" ]] || fail "the watchdog of jobs restarted"
ok

#!/usr/bin/env bash
# The in-server watchdog (extension/watchdog.c) runs with its own settings,
# whatever its database (or the role it connects as) sets: no lock_timeout,
# and transactions that may write.  With the database's lock_timeout of
# 10 ms, a tick that met a lock a client held for a moment (a SHARE lock on
# bgexec.job: _recount, a CREATE INDEX) failed: every expired job "left as
# it is" with a lock-timeout warning, the tick's retention an ERROR, the
# watchdog backing off.  With the database's default_transaction_read_only,
# every tick failed and no expired lease was ever taken back.  No daemon
# runs.  Database settings apply as a session connects: the watchdog is
# terminated after each ALTER DATABASE, and the postmaster starts it again
# (10 s later, bgw_restart_time).
source "$(dirname "$0")/lib.sh"
cluster_start "$E2E_DIR/pg" 58020 "$E2E_FSYNC" "bgexec.database = 'jobs'" \
  "bgexec.watchdog_interval = '200ms'" "bgexec.retention = '1h'" >/dev/null || fail "cluster did not start"
LOG=$E2E_DIR/pg/postgres.log
psql -qX -d postgres -c "CREATE DATABASE jobs" >/dev/null
export PGDATABASE=jobs
# The test's own sessions keep the server's defaults.
export PGOPTIONS="-c lock_timeout=0 -c default_transaction_read_only=off"
sql "CREATE EXTENSION bgexec" >/dev/null
[[ ${#E2E_PIDS[@]} -eq 0 ]] || fail "no daemon may run in this test"
watchdog_pid() { sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'bgexec watchdog' AND datname = 'jobs'"; }
watchdog_up() { [[ -n $(watchdog_pid) ]]; }
wait_for 30 watchdog_up || fail "the watchdog is not connected to database jobs"

# restart_watchdog: a new watchdog process, which reads the database's settings.
restart_watchdog() {
  local old new_pid
  old=$(watchdog_pid)
  sql "SELECT pg_terminate_backend($old)" >/dev/null
  new_watchdog() { new_pid=$(watchdog_pid); [[ -n $new_pid && $new_pid != "$old" ]]; }
  wait_for 40 new_watchdog || fail "the watchdog did not come back after pg_terminate_backend"
  # the new process's first tick has run
  sleep 1
}
# expired_job LEASE: a job claimed by a "worker" that vanished (its lease
# never renewed).
expired_job() {
  local id
  id=$(sql "SELECT bgexec.submit('noop', queue => 'wd')")
  [[ $(sql "SELECT count(*) FROM bgexec.claim('ghost', '{wd}', 1, '$1')") == 1 ]] || fail "claim"
  echo "$id"
}
# since OFFSET: the server log past byte OFFSET.
since() { tail -c +"$(($1 + 1))" "$LOG"; }
log_size() { stat -c %s "$LOG"; }

# 1. lock_timeout: a client holds a SHARE lock on bgexec.job from before
# the lease expires (3 s) until 2 s after: the watchdog's reconcile waits
# for it, and takes the job back once the client commits, with nothing
# failed.
sql "ALTER DATABASE jobs SET lock_timeout = '10ms'" >/dev/null
restart_watchdog
j=$(expired_job '3 seconds')
mark=$(log_size)
hold_open
hold "LOCK TABLE bgexec.job IN SHARE MODE;"
hold "SELECT 'locked', lease_expires_at > now() FROM bgexec.job WHERE id = $j;"
wait_for 10 held locked || fail "the test's session did not lock bgexec.job: $(cat "$E2E_DIR/hold.out")"
grep -q '^locked|t$' "$E2E_DIR/hold.out" || fail "the lease expired before the test's session locked bgexec.job (a slow machine)"
sleep 5
[[ $(job_status "$j") == running ]] || fail "job $j is $(job_status "$j") while bgexec.job was locked"
hold "COMMIT;"
exec 7>&-
wait_status "$j" failed 20
[[ $(sql "SELECT error->>'reason' FROM bgexec.job WHERE id = $j") == worker_lost ]] || fail "reason"
! since "$mark" | grep -E 'lock timeout|left as it is' >/dev/null \
  || fail "the watchdog's ticks failed on the database's lock_timeout: $(since "$mark" | grep -E 'lock timeout|left as it is' | head -3)"

# 2. default_transaction_read_only: the watchdog still takes an expired
# lease back, and purges (retention) a job finished two hours ago.
sql "ALTER DATABASE jobs SET default_transaction_read_only = on" >/dev/null
restart_watchdog
mark=$(log_size)
j=$(expired_job '1 second')
old=$(sql "SELECT bgexec.submit('noop', queue => 'wd-old')")
sql "SELECT bgexec.stop($old)" >/dev/null
sql "UPDATE bgexec.job SET finished_at = now() - interval '2 hours' WHERE id = $old" >/dev/null
wait_status "$j" failed 20
purged() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE id = $old") == 0 ]]; }
wait_for 20 purged || fail "retention did not purge job $old under default_transaction_read_only"
! since "$mark" | grep -E 'read-only transaction|left as it is' >/dev/null \
  || fail "the watchdog's ticks failed on the database's default_transaction_read_only: $(since "$mark" | grep -E 'read-only|left as it is' | head -3)"
ok

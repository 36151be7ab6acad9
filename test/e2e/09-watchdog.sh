#!/usr/bin/env bash
# The in-server watchdog (DESIGN.md §6): with bgexec in
# shared_preload_libraries, recovery happens with no worker daemon alive.
# A job whose worker vanished (lease expired) is failed/worker_lost by the
# background worker alone, a retry-safe one is requeued, a job past its
# deadline is timed out, and bgexec.retention purges old terminal jobs.
source "$(dirname "$0")/lib.sh"
cluster_start "$E2E_DIR/pg" 57949 "bgexec.database = 'jobs'" "bgexec.watchdog_interval = '200ms'" \
  "bgexec.retention = '1h'" >/dev/null || fail "cluster did not start"
psql -qX -d postgres -c "CREATE DATABASE jobs" >/dev/null
export PGDATABASE=jobs
sql "CREATE EXTENSION bgexec" >/dev/null

# The watchdog runs in the configured database, and nothing else is running.
watchdog_in_jobs() {
  [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'bgexec watchdog' AND datname = 'jobs'") == 1 ]]
}
wait_for 20 watchdog_in_jobs || fail "the watchdog is not connected to database jobs"
[[ ${#E2E_PIDS[@]} -eq 0 ]] || fail "no daemon may run in this test"

once=$(sql "SELECT bgexec.submit('noop', queue => 'wd')")
twice=$(sql "SELECT bgexec.submit('noop', queue => 'wd', max_attempts => 2)")
late=$(sql "SELECT bgexec.submit('noop', queue => 'wd', timeout => '1 hour')")
# A "worker" that claims with a 1 s lease and then vanishes (never heartbeats).
[[ $(sql "SELECT count(*) FROM bgexec.claim('ghost', '{wd}', 3, '1 second')") == 3 ]] || fail "claim"
sql "UPDATE bgexec.job SET lease_expires_at = now() + interval '1 hour', deadline = now() - interval '1 second' WHERE id = $late" >/dev/null

wait_status "$once" failed 20
[[ $(sql "SELECT error->>'reason' FROM bgexec.job WHERE id = $once") == worker_lost ]] || fail "reason"
requeued() { [[ $(sql "SELECT status || ':' || attempt FROM bgexec.job WHERE id = $twice") == queued:1 ]]; }
wait_for 20 requeued || fail "the retry-safe job was not requeued"
wait_status "$late" timed_out 20
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id IN ($once, $late) AND kind IN ('failed', 'timed_out')") == 2 ]] \
  || fail "exactly one terminal event per job"

# Retention: terminal jobs finished over an hour ago go, with their events.
sql "UPDATE bgexec.job SET finished_at = now() - interval '2 hours' WHERE id = $once" >/dev/null
purged() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE id = $once") == 0 ]]; }
wait_for 20 purged || fail "retention did not purge the old job"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $once") == 0 ]] || fail "events left behind"
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE id = $late") == 1 ]] || fail "a recent terminal job was purged"
ok

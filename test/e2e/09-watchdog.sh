#!/usr/bin/env bash
# The in-server watchdog (DESIGN.md §6): with bgexec in
# shared_preload_libraries, recovery happens with no worker daemon alive.
# A job whose worker vanished (lease expired) is failed/worker_lost by the
# background worker alone, a retry-safe one is requeued, a job past its
# deadline is timed out, a due schedule's job is submitted,
# bgexec.retention purges old terminal jobs and the rows of workers gone, and
# bgexec.vacuum_threshold dead rows in bgexec.job get it vacuumed; a second
# database bgexec.database names has a watchdog of its own.
source "$(dirname "$0")/lib.sh"
cluster_start "$E2E_DIR/pg" 57949 "$E2E_FSYNC" "bgexec.database = 'jobs, Tenant2'" "bgexec.watchdog_interval = '200ms'" \
  "bgexec.retention = '1h'" "bgexec.vacuum_threshold = 2000" >/dev/null || fail "cluster did not start"
# Every session of this cluster defaults to REPEATABLE READ (set before the
# database exists, so before the watchdog connects): the watchdog runs its
# own transactions READ COMMITTED, which the capped queue's schedule below
# needs (_require_read_committed).
psql -qX -d postgres -c "ALTER ROLE postgres SET default_transaction_isolation = 'repeatable read'" >/dev/null
psql -qX -d postgres -c "CREATE DATABASE jobs" >/dev/null
export PGDATABASE=jobs
sql "CREATE EXTENSION bgexec" >/dev/null
[[ $(sql "SHOW default_transaction_isolation") == "repeatable read" ]] || fail "sessions are not repeatable read"

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
# One transaction: a second statement that came over a second after the
# claim (a loaded machine) met the watchdog's reconcile of the same job, a
# serialization failure in this REPEATABLE READ session.
[[ $(sql "BEGIN; SELECT count(*) FROM bgexec.claim('ghost', '{wd}', 3, '1 second');
          UPDATE bgexec.job SET lease_expires_at = now() + interval '1 hour', deadline = now() - interval '1 second'
           WHERE id = $late; COMMIT") == 3 ]] || fail "claim"

wait_status "$once" failed 20
[[ $(sql "SELECT error->>'reason' FROM bgexec.job WHERE id = $once") == worker_lost ]] || fail "reason"
requeued() { [[ $(sql "SELECT status || ':' || attempt FROM bgexec.job WHERE id = $twice") == queued:1 ]]; }
wait_for 20 requeued || fail "the retry-safe job was not requeued"
wait_status "$late" timed_out 20
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id IN ($once, $late) AND kind IN ('failed', 'timed_out')") == 2 ]] \
  || fail "exactly one terminal event per job"

# Schedules: a due schedule's job is submitted by the watchdog alone, once,
# into a capped queue.  A yearly expression, so that no later tick comes due
# while the test looks (an every-minute one fired again, rightly, when the
# test ran across a minute's end).
sql "SELECT bgexec.configure_queue('wd-sched', max_queued => 10)" >/dev/null
sql "SELECT bgexec.schedule('yearly', '0 0 1 1 *', 'noop', queue => 'wd-sched')" >/dev/null
sql "UPDATE bgexec.schedule SET next_run_at = now() - interval '5 minutes'" >/dev/null
fired() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = 'wd-sched'") == 1 ]]; }
wait_for 20 fired || fail "the watchdog did not fire the due schedule"
[[ $(sql "SELECT next_run_at > now() AND last_error IS NULL FROM bgexec.schedule") == t ]] \
  || fail "the schedule did not move on: $(sql "SELECT next_run_at, last_error FROM bgexec.schedule")"
sleep 1
fired || fail "the schedule fired more than once for one tick"
sql "SELECT bgexec.unschedule('yearly')" >/dev/null

# Retention: terminal jobs finished over an hour ago go, with their events.
sql "UPDATE bgexec.job SET finished_at = now() - interval '2 hours' WHERE id = $once" >/dev/null
purged() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE id = $once") == 0 ]]; }
wait_for 20 purged || fail "retention did not purge the old job"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $once") == 0 ]] || fail "events left behind"
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE id = $late") == 1 ]] || fail "a recent terminal job was purged"
# and the rows of workers gone over an hour (_retire_workers): one that
# stopped, one killed (never marked stopped); not one that is alive.
sql "SELECT bgexec.register_worker(n, '{wd}', 1, '{}') FROM unnest('{wd-stopped,wd-killed,wd-alive}'::text[]) n" >/dev/null
sql "UPDATE bgexec.worker SET heartbeat_at = now() - interval '3 hours',
            stopped_at = CASE WHEN id = 'wd-stopped' THEN now() - interval '2 hours' END
      WHERE id IN ('wd-stopped', 'wd-killed')" >/dev/null
retired() { [[ $(sql "SELECT count(*) FROM bgexec.worker WHERE id IN ('wd-stopped', 'wd-killed')") == 0 ]]; }
wait_for 20 retired || fail "retention did not remove the rows of workers gone: $(sql "SELECT string_agg(id, ' ') FROM bgexec.worker")"
[[ $(sql "SELECT count(*) FROM bgexec.worker WHERE id = 'wd-alive'") == 1 ]] || fail "a live worker's row was removed"
grep -q 'bgexec watchdog removed 2 rows of workers gone' "$E2E_DIR/pg/postgres.log" || fail "no log line for the rows removed"
# A tick purges batch after batch while they come whole (for up to half the
# interval): one batch a tick fell behind a steady stream of jobs, and the
# table grew without bound.  60 old jobs in batches of 5: a tick's log line
# counts more than one batch.
sql "ALTER SYSTEM SET bgexec.retention_batch = 5" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
sql "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'ret'))
       FROM generate_series(1, 60)))" >/dev/null
[[ $(sql "SELECT count(*) FROM bgexec.finish_many((SELECT jsonb_agg(jsonb_build_object(
         'job_id', job_id, 'lease', lease, 'outcome', 'completed', 'body', '{}'::jsonb))
         FROM bgexec.claim('ret', '{ret}', 60)))") == 60 ]] || fail "claim and finish 60 jobs"
sql "UPDATE bgexec.job SET finished_at = now() - interval '2 hours' WHERE queue = 'ret'" >/dev/null
all_purged() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = 'ret'") == 0 ]]; }
wait_for 20 all_purged || fail "retention did not purge the 60 old jobs"
most=$(sed -n 's/.*bgexec watchdog purged \([0-9]*\) finished jobs.*/\1/p' "$E2E_DIR/pg/postgres.log" | sort -n | tail -1)
((most > 5)) || fail "a tick purged at most $most jobs, one batch of 5"
sql "ALTER SYSTEM RESET bgexec.retention_batch" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null

# Vacuum: claims walk the dead index entries of the jobs claimed since the
# table's last vacuum, so the watchdog vacuums bgexec.job once it has
# bgexec.vacuum_threshold dead rows.  Autovacuum is off for the table here:
# every vacuum counted (vacuum_count, not autovacuum_count) is the watchdog's.
sql "ALTER TABLE bgexec.job SET (autovacuum_enabled = false)" >/dev/null
vacuums() { sql "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'bgexec.job'::regclass"; }
dead() { sql "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'bgexec.job'::regclass"; }
few_dead() { (($(dead) < 2000)); }
more_vacuums_than() { (($(vacuums) > $1)); }
# submit_noops QUEUE N
submit_noops() {
  sql "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', '$1'))
         FROM generate_series(1, $2)))" >/dev/null
}
# 1500 jobs claimed and finished: 3000 dead row versions.
burn() {
  submit_noops vac 1500
  [[ $(sql "SELECT count(*) FROM bgexec.finish_many((SELECT jsonb_agg(jsonb_build_object(
           'job_id', job_id, 'lease', lease, 'outcome', 'completed', 'body', '{}'::jsonb))
           FROM bgexec.claim('vac', '{vac}', 1500)))") == 1500 ]] || fail "burn: claim and finish 1500 jobs"
}
# Index pages a claim's scan of queue vac reads (the second scan: the first
# also visits the heap to mark the dead entries).
scan_pages() {
  local q="SET enable_seqscan = off; EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF)
    SELECT id FROM bgexec.job WHERE status = 'queued' AND queue = 'vac'
     ORDER BY priority DESC, run_after, id LIMIT 1"
  sql "$q" >/dev/null
  sql "$q" | sed -n 's/.*Buffers: shared hit=\([0-9]*\).*/\1/p' | head -1
}
# After a vacuum: the dead rows are gone, and so are the dead entries of the
# runnable index (PostgreSQL's own VACUUM may skip the indexes when few pages
# have dead rows).
expect_clean() {
  wait_for 20 few_dead || fail "dead rows left $1: $(dead)"
  local p; p=$(scan_pages)
  ((p <= 2)) || fail "a scan of the drained queue still reads $p index pages $1"
}
[[ $(vacuums) == 0 ]] || fail "vacuumed below the threshold ($(dead) dead rows)"
burn
wait_for 20 more_vacuums_than 0 || fail "no vacuum at $(dead) dead rows"
expect_clean "after the vacuum"

# -1 turns it off (a reload is enough), and back on.
sql "ALTER SYSTEM SET bgexec.vacuum_threshold = -1" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
sleep 1
v=$(vacuums)
burn
sleep 3  # 15 watchdog runs
[[ $(vacuums) == "$v" ]] || fail "vacuumed with bgexec.vacuum_threshold = -1"
p=$(scan_pages)
((p > 2)) || fail "without a vacuum the scan should walk the dead entries' pages (read $p)"
sql "ALTER SYSTEM RESET bgexec.vacuum_threshold" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
wait_for 20 more_vacuums_than "$v" || fail "no vacuum after turning it back on ($(dead) dead rows)"
expect_clean "after the second vacuum"

# Rows that a vacuum removed are not counted again when their deleter
# reports them late (after the vacuum reset the statistics' count): a
# session deletes 3000 jobs, vacuums, and goes on for 4 s.  The watchdog
# must not vacuum after it (it did, a second later, before the baseline).
submit_noops gone 3000
sleep 3  # past the settling time of the previous vacuum
v=$(vacuums)
{ echo "DELETE FROM bgexec.job WHERE queue = 'gone';"; echo "VACUUM bgexec.job;"
  for _ in $(seq 1 40); do echo "SELECT pg_sleep(0.1);"; done; } | psql -qXAt >/dev/null
sleep 3
[[ $(vacuums) == $((v + 1)) ]] || fail "the watchdog vacuumed for rows already removed ($(vacuums) vacuums, expected $((v + 1)); $(dead) dead rows)"

# Retention purges for up to half the interval (100 ms here), not until the
# backlog is gone (a mutation test): 1500 old jobs in batches of 1 take
# more than one tick.  (After the vacuum checks: their dead rows would
# have the watchdog vacuum before those.)
sql "ALTER SYSTEM SET bgexec.retention_batch = 1" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
for _ in 1 2 3; do
  sql "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'ret2'))
         FROM generate_series(1, 500)))" >/dev/null
  [[ $(sql "SELECT count(*) FROM bgexec.finish_many((SELECT jsonb_agg(jsonb_build_object(
           'job_id', job_id, 'lease', lease, 'outcome', 'completed', 'body', '{}'::jsonb))
           FROM bgexec.claim('ret', '{ret2}', 500)))") == 500 ]] || fail "claim and finish 500 jobs"
done
sql "UPDATE bgexec.job SET finished_at = now() - interval '2 hours' WHERE queue = 'ret2'" >/dev/null
all_purged2() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = 'ret2'") == 0 ]]; }
wait_for 60 all_purged2 || fail "retention did not purge the 1500 old jobs"
most=$(sed -n 's/.*bgexec watchdog purged \([0-9]*\) finished jobs.*/\1/p' "$E2E_DIR/pg/postgres.log" | sort -n | tail -1)
((most < 1500)) || fail "a tick purged all $most jobs: it ran past half the interval"
sql "ALTER SYSTEM RESET bgexec.retention_batch" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null

# bgexec.database names a list: a database of its own (a tenant's, say; the
# name as written, not folded) has its own watchdog.  With one for the
# first database only, a job there whose worker vanished stayed running.
psql -qX -d postgres -c 'CREATE DATABASE "Tenant2"' >/dev/null
PGDATABASE=Tenant2 sql "CREATE EXTENSION bgexec" >/dev/null
in_tenant2() {
  [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'bgexec watchdog' AND datname = 'Tenant2'") == 1 ]]
}
wait_for 30 in_tenant2 || fail "no watchdog in database Tenant2"
t2=$(PGDATABASE=Tenant2 sql "SELECT bgexec.submit('noop', queue => 'wd')")
[[ $(PGDATABASE=Tenant2 sql "SELECT count(*) FROM bgexec.claim('ghost', '{wd}', 1, '1 second')") == 1 ]] || fail "claim in Tenant2"
t2_lost() { [[ $(PGDATABASE=Tenant2 sql "SELECT status || ' ' || (error->>'reason') FROM bgexec.job WHERE id = $t2") == "failed worker_lost" ]]; }
wait_for 20 t2_lost || fail "the watchdog of Tenant2 did not take the lease back: $(PGDATABASE=Tenant2 sql "SELECT status FROM bgexec.job WHERE id = $t2")"
watchdog_in_jobs || fail "the watchdog of jobs is gone"
ok

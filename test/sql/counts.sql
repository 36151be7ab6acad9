-- counts: queue_stats reads its terminal counts from bgexec.queue_count, kept
-- by the functions that finish, retry and delete jobs; every path keeps it
-- equal to a count of the jobs themselves.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
-- the jobs of every earlier test: finish, finish_many, reconcile, deadlines,
-- stop, retry, suspend/resume, caps, purge, security, events
SELECT count(*) > 20 AS many_jobs, count(DISTINCT queue) > 5 AS many_queues FROM bgexec.job;
SELECT * FROM stats_mismatch();
-- each path once more on a queue of its own, checked after each step
SELECT bgexec.submit('noop', queue => 'cnt', max_attempts => 1) AS j1 \gset
SELECT bgexec.submit('noop', queue => 'cnt', max_attempts => 1) AS j2 \gset
SELECT bgexec.submit('noop', queue => 'cnt', max_attempts => 1) AS j3 \gset
SELECT bgexec.submit('noop', queue => 'cnt', max_attempts => 1) AS j4 \gset
SELECT bgexec.submit('noop', queue => 'cnt', max_attempts => 1, timeout => '1 hour') AS j5 \gset
SELECT bgexec.submit('noop', queue => 'cnt', max_attempts => 1) AS j6 \gset
SELECT array_agg(job_id ORDER BY job_id) AS ids, array_agg(lease ORDER BY job_id) AS ls
  FROM bgexec.claim('wc', '{cnt}', 5) \gset
-- finish (one), finish_many (completed set-based, failed through _terminal)
SELECT bgexec.finish(:j1, (:'ls'::bigint[])[1], 'completed', '{}');
SELECT status FROM bgexec.finish_many(jsonb_build_array(
         jsonb_build_object('job_id', :j2, 'lease', (:'ls'::bigint[])[2], 'outcome', 'completed'),
         jsonb_build_object('job_id', :j3, 'lease', (:'ls'::bigint[])[3], 'outcome', 'failed')));
SELECT * FROM stats_mismatch();
-- reconcile: a lost worker (failed) and a passed deadline (timed_out)
SELECT expire_lease(:j4);
UPDATE bgexec.job SET deadline = now() - interval '1 second' WHERE id = :j5;
SELECT bgexec.reconcile();
-- stop of a queued job: cancelled
SELECT bgexec.stop(:j6);
SELECT completed, failed, cancelled, timed_out FROM bgexec.queue_stats WHERE queue = 'cnt';
SELECT * FROM stats_mismatch();
-- retry takes a job out of its terminal count
SELECT bgexec.retry(:j3);
SELECT failed, queued FROM bgexec.queue_stats WHERE queue = 'cnt';
SELECT * FROM stats_mismatch();
-- a refused finish counts nothing
SELECT status FROM bgexec.finish_many(jsonb_build_array(
         jsonb_build_object('job_id', :j1, 'lease', (:'ls'::bigint[])[1], 'outcome', 'completed')));
SELECT * FROM stats_mismatch();
-- deletes: purge, the watchdog's retention, and by hand (the job_deleted trigger)
UPDATE bgexec.job SET finished_at = now() - interval '2 hours' WHERE id IN (:j1, :j2);
SELECT bgexec.purge('1 hour');
SELECT * FROM stats_mismatch();
SELECT bgexec._retention('0 seconds', 2);
SELECT * FROM stats_mismatch();
DELETE FROM bgexec.job WHERE queue = 'cnt';
SELECT * FROM stats_mismatch();
SELECT count(*) FROM bgexec.queue_stats WHERE queue = 'cnt';
-- a status changed by hand, outside the functions, is not counted ...
SELECT bgexec.submit('noop', queue => 'cnt') AS h \gset
UPDATE bgexec.job SET status = 'cancelled', finished_at = now() WHERE id = :h;
SELECT * FROM stats_mismatch();
-- ... until _recount rebuilds the counts from the jobs
SELECT bgexec._recount() > 0 AS recounted;
SELECT * FROM stats_mismatch();
-- clients read queue_stats but neither write the counts nor recount; the
-- counts are fleet-wide (every owner's jobs), whoever reads them
SELECT sum(queued + running + suspended + completed + failed + cancelled + timed_out) AS all_jobs
  FROM bgexec.queue_stats \gset
SET ROLE regress_alice;
SELECT sum(queued + running + suspended + completed + failed + cancelled + timed_out) = :all_jobs
       AS alice_sees_every_owner
  FROM bgexec.queue_stats;
SELECT * FROM try('UPDATE bgexec.queue_count SET n = n + 1');
SELECT * FROM try('SELECT bgexec._recount()');
SELECT count(*) > 0 AS alice_sees_stats FROM bgexec.queue_stats;
RESET ROLE;
-- a run_after of -infinity, written past submit, does not break the view
SELECT bgexec.submit('noop', queue => 'inf') AS inf \gset
SELECT bgexec.submit('noop', queue => 'inf') AS hour_ago \gset
UPDATE bgexec.job SET run_after = '-infinity' WHERE id = :inf;
-- (and one an hour old: submit stores a run_after in the past as now())
UPDATE bgexec.job SET run_after = now() - interval '1 hour' WHERE id = :hour_ago;
SELECT queued, oldest_queued_age >= interval '1 hour' AS age_of_the_finite_one
  FROM bgexec.queue_stats WHERE queue = 'inf';
-- workers: the live workers that claim from each queue (a queue twice in a
-- worker's list counts it once); a stopped or silent one is not counted,
-- and a queue no job or setting names is not listed for its workers alone
SELECT bgexec.submit('noop', queue => 'wq-a') > 0 AS a, bgexec.submit('noop', queue => 'wq-b') > 0 AS b;
SELECT bgexec.register_worker('cw1', '{wq-a,wq-b,wq-a}', 1, '{"host": "h", "pid": 1}');
SELECT bgexec.register_worker('cw2', '{wq-a,wq-c}', 1, '{"host": "h", "pid": 2}');
SELECT bgexec.register_worker('cw3', '{wq-b}', 1, '{"host": "h", "pid": 3}');
SELECT queue, workers FROM bgexec.queue_stats WHERE queue LIKE 'wq-%' ORDER BY queue;
SELECT bgexec.deregister_worker('cw3');
UPDATE bgexec.worker SET heartbeat_at = now() - interval '2 minutes' WHERE id = 'cw2';
SELECT queue, workers FROM bgexec.queue_stats WHERE queue LIKE 'wq-%' ORDER BY queue;
SET ROLE regress_alice;
SELECT queue, workers FROM bgexec.queue_stats WHERE queue LIKE 'wq-%' ORDER BY queue;
RESET ROLE;
DELETE FROM bgexec.worker WHERE id IN ('cw1', 'cw2', 'cw3');
SELECT queue, workers FROM bgexec.queue_stats WHERE queue LIKE 'wq-%' ORDER BY queue;
-- TRUNCATE empties the counts with the jobs
TRUNCATE bgexec.job;
SELECT count(*) AS counts_left FROM bgexec.queue_count;
SELECT * FROM stats_mismatch();
-- reconcile folds the counts only when that takes away at least half the
-- rows: 300 queues' counts, one row each, stayed over 256 rows, and every
-- reconcile deleted and wrote them all again (WAL on an idle system)
BEGIN;
INSERT INTO bgexec.queue_count (queue, status, n)
SELECT 'cq' || g, 'completed', 1 FROM generate_series(1, 300) g;
SELECT bgexec._compact_counts() AS folded_one_row_each;
INSERT INTO bgexec.queue_count (queue, status, n)
SELECT 'cq' || g, 'completed', 2 FROM generate_series(1, 300) g;
SELECT bgexec._compact_counts() AS folded_two_rows_each;
SELECT count(*) AS rows, sum(n) AS total FROM bgexec.queue_count;
ROLLBACK;

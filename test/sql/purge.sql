-- purge: deletes terminal jobs finished before now() - older_than, with their events.
\set SHOW_CONTEXT never
SELECT bgexec.submit('noop', queue => 'pg') AS done \gset
SELECT bgexec.submit('noop', queue => 'pg') AS live \gset
SELECT lease AS l FROM bgexec.claim('w', '{pg}', 1) \gset
SELECT bgexec.finish(:done, :l, 'completed', '{}');
-- too recent: nothing purged
SELECT bgexec.purge('1 hour') AS purged_recent \gset
SELECT count(*) FROM bgexec.job WHERE id = :done;
UPDATE bgexec.job SET finished_at = now() - interval '2 hours' WHERE id = :done;
SELECT bgexec.purge('1 hour') >= 1 AS purged;
SELECT count(*) AS jobs, (SELECT count(*) FROM bgexec.job_event WHERE job_id = :done) AS events
  FROM bgexec.job WHERE id = :done;
-- non-terminal jobs are never purged
SELECT bgexec.purge('0 s') >= 0, (SELECT status FROM bgexec.job WHERE id = :live);
-- a client purges only its own jobs
SET ROLE regress_alice;
SELECT bgexec.submit('noop', queue => 'pg-a') AS aj \gset
RESET ROLE;
SELECT bgexec.stop(:aj);
UPDATE bgexec.job SET finished_at = now() - interval '2 hours' WHERE id = :aj;
SET ROLE regress_bob;
SELECT bgexec.purge('1 hour');
RESET ROLE;
SELECT count(*) FROM bgexec.job WHERE id = :aj;
SET ROLE regress_alice;
SELECT bgexec.purge('1 hour');
RESET ROLE;
-- max_jobs: at most that many, oldest first, and a client's own only; the
-- caller repeats until fewer come back.  Fifty years back, so that no job of
-- the earlier files is old enough.
SET ROLE regress_alice;
SELECT bgexec.submit('noop', queue => 'pg-batch') AS b1 \gset
SELECT bgexec.submit('noop', queue => 'pg-batch') AS b2 \gset
SELECT bgexec.submit('noop', queue => 'pg-batch') AS b3 \gset
RESET ROLE;
SET ROLE regress_bob;
SELECT bgexec.submit('noop', queue => 'pg-batch') AS bobs \gset
RESET ROLE;
SELECT count(bgexec.stop(id)) FROM bgexec.job WHERE queue = 'pg-batch';
-- oldest: bob's, then b2, b3, b1
UPDATE bgexec.job SET finished_at = now() - interval '50 years' - CASE id WHEN :bobs THEN interval '4 days'
       WHEN :b2 THEN interval '3 days' WHEN :b3 THEN interval '2 days' ELSE interval '1 day' END
 WHERE queue = 'pg-batch';
SET ROLE regress_alice;
SELECT bgexec.purge('49 years', 2) AS first_batch;
RESET ROLE;
SELECT id = :b1 AS b1, id = :bobs AS bobs FROM bgexec.job WHERE queue = 'pg-batch' ORDER BY id;
SET ROLE regress_alice;
SELECT bgexec.purge('49 years', 2) AS second_batch, bgexec.purge('49 years', 2) AS third_batch;
RESET ROLE;
-- max_jobs below 1 is refused (22023) and deletes nothing; null is every job
SELECT * FROM try($$SELECT bgexec.purge('49 years', 0)$$);
SELECT * FROM try($$SELECT bgexec.purge('49 years', -1)$$);
SELECT count(*) AS bobs_left FROM bgexec.job WHERE id = :bobs;
SELECT bgexec.purge('49 years', NULL) AS every_one;
SELECT count(*) AS left_in_queue FROM bgexec.job WHERE queue = 'pg-batch';
-- statuses: only jobs that ended so (completed kept a day, failures a
-- month: River's retention per state); not a terminal status, an empty
-- list or a null in it is 22023, nothing deleted
SET ROLE regress_alice;
SELECT bgexec.submit('noop', queue => 'pg-st') AS sc \gset
SELECT bgexec.submit('noop', queue => 'pg-st') AS sx \gset
RESET ROLE;
SELECT lease AS stl FROM bgexec.claim('w', '{pg-st}', 1) \gset
SELECT bgexec.finish(:sc, :stl, 'completed', '{}');
SELECT bgexec.stop(:sx);
UPDATE bgexec.job SET finished_at = now() - interval '50 years' WHERE queue = 'pg-st';
-- (a job of the queue that ended now: it stays, and its events, which a
-- test below counts)
SELECT bgexec.stop(bgexec.submit('noop', queue => 'pg-st'));
SELECT * FROM try($$SELECT bgexec.purge('49 years', NULL, '{completed,queued}')$$);
SELECT * FROM try($$SELECT bgexec.purge('49 years', NULL, '{suspended}')$$);
SELECT * FROM try($$SELECT bgexec.purge('49 years', 10, '{running}')$$);
SELECT * FROM try($$SELECT bgexec.purge('49 years', NULL, '{}')$$);
SELECT * FROM try($$SELECT bgexec.purge('49 years', 10, ARRAY['completed', NULL]::bgexec.job_status[])$$);
SET ROLE regress_alice;
SELECT bgexec.purge('49 years', NULL, '{failed,timed_out}') AS none_failed,
       bgexec.purge('49 years', 10, '{completed}') AS completed_batch;
RESET ROLE;
SELECT status FROM bgexec.job WHERE queue = 'pg-st' ORDER BY id;
SELECT bgexec.purge('49 years', NULL, '{cancelled}') AS cancelled_as_superuser;
SELECT count(*) AS left_in_queue FROM bgexec.job WHERE queue = 'pg-st';
-- a superuser's purge with statuses, in batches (_retention) and at once:
-- only jobs that ended so, of every owner (a mutation test: a superuser's
-- paths dropped the statuses unnoticed, deleting every ended job)
SELECT bgexec.submit('noop', queue => 'pg-su') AS uc \gset
SELECT bgexec.submit('noop', queue => 'pg-su') AS ux \gset
SELECT lease AS ul FROM bgexec.claim('w', '{pg-su}', 1) WHERE job_id = :uc \gset
SELECT bgexec.finish(:uc, :ul, 'completed', '{}');
SELECT bgexec.stop(:ux);
UPDATE bgexec.job SET finished_at = now() - interval '50 years' WHERE queue = 'pg-su';
SELECT bgexec.purge('49 years', 10, '{failed}') AS su_batch_none,
       bgexec.purge('49 years', NULL, '{failed}') AS su_all_none;
SELECT bgexec.purge('49 years', 10, '{cancelled}') AS su_batch_cancelled;
SELECT status FROM bgexec.job WHERE queue = 'pg-su' ORDER BY id;
SELECT bgexec.purge('49 years', 10, '{completed}') AS su_batch_completed;
-- retention (the watchdog's batch delete)
SELECT count(bgexec.submit('noop', queue => 'pg')) FROM generate_series(1, 3);
SELECT count(bgexec.stop(id)) FROM bgexec.job WHERE queue = 'pg' AND status = 'queued';
UPDATE bgexec.job SET finished_at = now() - interval '1 day' WHERE queue = 'pg' AND status = 'cancelled';
SELECT bgexec._retention('1 hour', 2), bgexec._retention('1 hour', 2), bgexec._retention('1 hour', 2);
-- retention of worker rows (_retire_workers, beside _retention): gone
-- longer than the interval, stopped or silent for a minute, and holding no
-- running job.  In a transaction rolled back, so that rows of the earlier
-- files stay as they were; only this block's rows are shown.
BEGIN;
SELECT bgexec.register_worker('retire-' || n, '{retire}', 1, '{}')
  FROM unnest(ARRAY['stopped-old', 'stopped-new', 'killed-old', 'killed-new', 'holding', 'alive',
                    'quiet', 'stopped-now']) AS n;
-- a lease of an hour: heartbeats 20 minutes apart, idle too
SELECT bgexec.register_worker('retire-long-lease', '{retire}', 1, '{"lease_s": 3600}');
SELECT bgexec.submit('noop', queue => 'retire') IS NOT NULL AS submitted;
SELECT count(*) FROM bgexec.claim('retire-holding', '{retire}', 1, '1 second');
UPDATE bgexec.worker SET heartbeat_at = now() - interval '3 hours', stopped_at = now() - interval '2 hours'
 WHERE id = 'retire-stopped-old';
UPDATE bgexec.worker SET heartbeat_at = now() - interval '3 hours', stopped_at = now() - interval '10 minutes'
 WHERE id = 'retire-stopped-new';
-- killed: never marked stopped, its heartbeats ended
UPDATE bgexec.worker SET heartbeat_at = now() - interval '2 hours' WHERE id = 'retire-killed-old';
UPDATE bgexec.worker SET heartbeat_at = now() - interval '10 minutes' WHERE id = 'retire-killed-new';
-- silent as long, but its job is still running under its id (lease expired,
-- not yet reconciled)
UPDATE bgexec.worker SET heartbeat_at = now() - interval '2 hours' WHERE id = 'retire-holding';
UPDATE bgexec.job SET lease_expires_at = now() - interval '1 hour' WHERE lease_owner = 'retire-holding';
UPDATE bgexec.worker SET heartbeat_at = now() - interval '30 seconds' WHERE id = 'retire-alive';
UPDATE bgexec.worker SET heartbeat_at = now() - interval '2 minutes' WHERE id = 'retire-quiet';
UPDATE bgexec.worker SET heartbeat_at = now() - interval '10 minutes' WHERE id = 'retire-long-lease';
SELECT bgexec.deregister_worker('retire-stopped-now');
-- worker_stats, as a client reads it: alive within a minute and the lease
SET ROLE regress_alice;
SELECT id, alive FROM bgexec.worker_stats WHERE id LIKE 'retire-%' ORDER BY id;
RESET ROLE;
SELECT bgexec._retire_workers('1 hour') >= 2 AS retired;
SELECT id FROM bgexec.worker WHERE id LIKE 'retire-%' ORDER BY id;
-- with 0: every worker gone before now (retire-stopped-now stopped at this
-- transaction's now()), but not one heartbeating within the minute, nor
-- one within its lease
SELECT bgexec._retire_workers('0') >= 3 AS retired;
SELECT id FROM bgexec.worker WHERE id LIKE 'retire-%' ORDER BY id;
ROLLBACK;
-- negative: a negative interval, or one with a negative part ('-1 mon +31
-- days' compares as a day, but its cutoff was now() in a 31-day month, and
-- '-1 mon +30 days 1 hour' put it in the future: every terminal job deleted)
SELECT bgexec.purge('-1 day');
SELECT bgexec.purge('-1 mon +31 days');
SELECT bgexec.purge('-1 mon +30 days 1 hour');
SELECT bgexec.purge('1 day -1 hour');
SELECT bgexec.purge('1 mon -30 days');  -- equal to 0 by comparison
SELECT bgexec.purge('0 days') >= 0 AS zero_in_every_part;
-- negative: over 100 years, or a part over it (22008 at now() - older_than)
SELECT bgexec.purge('300000 years');
SELECT bgexec.purge('4000000 mons -119999000 days');
-- events go with their jobs on any delete, not only purge (no foreign key:
-- the job_deleted trigger); other jobs' events stay
SELECT bgexec.submit('noop', queue => 'pg-del') AS dj \gset
SELECT lease AS dl FROM bgexec.claim('w-pg', '{pg-del}', 1) \gset
SELECT bgexec.append_event(:dj, :dl, 'log', '{"line": "x"}');
SELECT bgexec.finish(:dj, :dl, 'completed', '{}');
SELECT count(*) AS events_of_job FROM bgexec.job_event WHERE job_id = :dj;
SELECT count(*) AS other_events FROM bgexec.job_event WHERE job_id <> :dj \gset
SELECT :other_events > 0 AS others_exist;
DELETE FROM bgexec.job WHERE id = :dj;
SELECT count(*) AS orphans FROM bgexec.job_event e WHERE NOT EXISTS (SELECT 1 FROM bgexec.job j WHERE j.id = e.job_id);
SELECT count(*) = :other_events AS others_kept FROM bgexec.job_event;
-- TRUNCATE of the jobs empties the log too (inside a transaction rolled back)
BEGIN;
TRUNCATE bgexec.job;
SELECT count(*) AS events_after_truncate FROM bgexec.job_event;
ROLLBACK;
-- a client's purge reads its own jobs through an index on owner when there
-- is one (README "Tuning": job_owner_idx), not every owner's finished jobs
-- (it tested "owner = caller OR superuser", which no index answers):
-- 3 of alice's jobs and 297 of bob's finished long ago
BEGIN;
CREATE INDEX job_owner_idx ON bgexec.job (owner, id);
INSERT INTO bgexec.job (queue, kind, owner, status, result, attempt, max_attempts, run_after,
                        created_at, started_at, finished_at, last_seq)
SELECT 'pg-own', 'noop', CASE WHEN g <= 3 THEN 'regress_alice' ELSE 'regress_bob' END,
       'completed', '{}', 1, 1, now() - interval '10 days', now() - interval '10 days',
       now() - interval '10 days', now() - interval '10 days', 1
  FROM generate_series(1, 300) g;
ANALYZE bgexec.job;
SELECT pg_stat_get_xact_tuples_returned('bgexec.job_finished_idx'::regclass) AS read0 \gset
SET ROLE regress_alice;
SELECT bgexec.purge('1 day', 2) AS batch, bgexec.purge('1 day') >= 1 AS rest;
RESET ROLE;
SELECT pg_stat_get_xact_tuples_returned('bgexec.job_finished_idx'::regclass) - :read0 < 100 AS own_jobs_read,
       (SELECT count(*) FROM bgexec.job WHERE queue = 'pg-own') AS left_of_bob;
ROLLBACK;

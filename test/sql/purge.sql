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
-- retention (the watchdog's batch delete)
SELECT count(bgexec.submit('noop', queue => 'pg')) FROM generate_series(1, 3);
SELECT count(bgexec.stop(id)) FROM bgexec.job WHERE queue = 'pg' AND status = 'queued';
UPDATE bgexec.job SET finished_at = now() - interval '1 day' WHERE queue = 'pg' AND status = 'cancelled';
SELECT bgexec._retention('1 hour', 2), bgexec._retention('1 hour', 2), bgexec._retention('1 hour', 2);
-- negative: a negative interval
SELECT bgexec.purge('-1 day');

-- deadlines: start of the attempt + timeout, on the DB clock; past it → timed_out.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
SELECT bgexec.submit('noop', queue => 'dl', timeout => '1 hour') AS j \gset
SELECT deadline BETWEEN now() + interval '59 minutes' AND now() + interval '61 minutes' AS deadline_set
  FROM bgexec.claim('w', '{dl}', 1);
SELECT bgexec.reconcile();
-- move the deadline into the past (as if an hour went by)
UPDATE bgexec.job SET deadline = now() - interval '1 second' WHERE id = :j;
SELECT bgexec.reconcile();
SELECT status, error->>'reason' AS reason, lease IS NULL AS released FROM bgexec.job WHERE id = :j;
SELECT event_kinds(:j), terminal_events(:j), gapless(:j);
-- the worker may report timed_out itself; a late completion is refused
SELECT bgexec.submit('noop', queue => 'dl', timeout => '5 minutes', max_attempts => 3) AS k \gset
SELECT lease AS l FROM bgexec.claim('w', '{dl}', 1) \gset
SELECT bgexec.finish(:k, :l, 'timed_out', '{"reason": "timeout"}');
SELECT bgexec.finish(:k, :l, 'completed', '{}') IS NULL AS late_refused;
SELECT status FROM bgexec.job WHERE id = :k;
-- no timeout: no deadline
SELECT bgexec.submit('noop', queue => 'dl') AS n \gset
SELECT deadline IS NULL AS no_deadline FROM bgexec.claim('w', '{dl}', 1);
-- negative: a non-positive timeout
SELECT bgexec.submit('noop', timeout => '0 s');
SELECT bgexec.submit('noop', timeout => '-1 minute');

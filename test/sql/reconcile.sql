-- reconcile: expired leases → queued (attempts left) or failed/worker_lost; at-most-once by default.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
SELECT bgexec.submit('noop', queue => 'rc') AS once \gset
SELECT bgexec.submit('noop', queue => 'rc', max_attempts => 2) AS twice \gset
SELECT count(*) FROM bgexec.claim('w', '{rc}', 2);
-- live leases are left alone
SELECT bgexec.reconcile();
SELECT expire_lease(:once), expire_lease(:twice);
SELECT bgexec.reconcile();
-- at-most-once (max_attempts = 1): failed, worker_lost, never re-run
SELECT status, error->>'reason' AS reason, error->>'worker' AS worker FROM bgexec.job WHERE id = :once;
SELECT event_kinds(:once), terminal_events(:once);
-- retry-safe (max_attempts = 2): queued again with backoff
SELECT status, attempt, error->>'reason' AS reason, lease IS NULL AS released FROM bgexec.job WHERE id = :twice;
-- (after the reconcile's own time, its event's: a backoff drawn below
-- the few ms between two statements failed a test against now())
SELECT j.run_after > e.created_at AS backs_off
  FROM bgexec.job j JOIN bgexec.job_event e ON e.job_id = j.id AND e.kind = 'retry_scheduled'
 WHERE j.id = :twice;
SELECT event_kinds(:twice), terminal_events(:twice);
-- second run expires too: now out of attempts → failed
UPDATE bgexec.job SET run_after = now() WHERE id = :twice;
SELECT count(*) FROM bgexec.claim('w', '{rc}', 2);
SELECT expire_lease(:twice);
SELECT bgexec.reconcile();
SELECT status, attempt, error->>'reason' AS reason FROM bgexec.job WHERE id = :twice;
SELECT gapless(:once), gapless(:twice), terminal_events(:twice);
-- reconcile again: nothing left to do
SELECT bgexec.reconcile();
-- a heartbeat before reconcile keeps the lease: extended, so nothing to reconcile
SELECT bgexec.submit('noop', queue => 'rc') AS hb \gset
SELECT lease AS l FROM bgexec.claim('w', '{rc}', 1) \gset
SELECT expire_lease(:hb);
SELECT action FROM bgexec.heartbeat('w', ARRAY[:l]::bigint[]);
SELECT bgexec.reconcile();
SELECT status FROM bgexec.job WHERE id = :hb;
-- reconcile finds expired leases and passed deadlines through their own
-- indexes, never by reading a running-set index whole (that walked every
-- entry left by recent runs until vacuum: 23 ms per call during a drain)
SELECT pg_stat_force_next_flush();
SELECT idx_scan AS key_scans FROM pg_stat_user_indexes WHERE indexrelid = 'bgexec.job_running_key_idx'::regclass \gset
SELECT idx_scan AS expiry_scans FROM pg_stat_user_indexes WHERE indexrelid = 'bgexec.job_running_expiry_idx'::regclass \gset
SELECT bgexec.reconcile();
SELECT pg_stat_force_next_flush();
SELECT (SELECT idx_scan FROM pg_stat_user_indexes
         WHERE indexrelid = 'bgexec.job_running_key_idx'::regclass) - :key_scans AS running_key_idx_scans,
       (SELECT idx_scan FROM pg_stat_user_indexes
         WHERE indexrelid = 'bgexec.job_running_expiry_idx'::regclass) > :expiry_scans AS expiry_idx_used;
-- one job whose row cannot be written (an event row written around the API
-- at its next seq) is left as it is, with a warning naming it: the other
-- expired leases of the call are still taken back (the whole call failed,
-- and with it every lease, deadline and schedule of the database)
SELECT bgexec.submit('noop', queue => 'rc-bad') AS bad \gset
SELECT bgexec.submit('noop', queue => 'rc-bad') AS good \gset
SELECT count(*) FROM bgexec.claim('w', '{rc-bad}', 2);
SELECT expire_lease(:bad), expire_lease(:good);
INSERT INTO bgexec.job_event (job_id, seq, kind) SELECT id, last_seq + 1, 'log' FROM bgexec.job WHERE id = :bad;
SET client_min_messages = error;  -- the warning names the job's id, which depends on the tests before
SELECT bgexec.reconcile() AS acted_on;
RESET client_min_messages;
SELECT id = :good AS good, status, error->>'reason' AS reason FROM bgexec.job WHERE id IN (:bad, :good) ORDER BY id;
DELETE FROM bgexec.job_event WHERE job_id = :bad AND seq = (SELECT last_seq + 1 FROM bgexec.job WHERE id = :bad);
SELECT bgexec.reconcile() AS acted_on;
SELECT status, error->>'reason' AS reason FROM bgexec.job WHERE id = :bad;
-- a capped queue: the slot of a job whose worker is lost is free at once,
-- and a worker waiting for the job the cap held is woken (_running_ended)
SELECT (bgexec.configure_queue('rcc', max_running => 1)).name;
SELECT bgexec.submit('noop', queue => 'rcc') AS ca \gset
SELECT bgexec.submit('noop', queue => 'rcc') AS cb \gset
SELECT count(*) FROM bgexec.claim('w', '{rcc}', 2);
SELECT jobs FROM bgexec.await_work('rcw', '{rcc}', 1, '0');  -- registers the waiter
SELECT expire_lease(:ca);
SELECT bgexec.reconcile() IS NOT NULL AS reconciled;
SELECT status, error->>'reason' AS reason FROM bgexec.job WHERE id = :ca;
SELECT jobs AS woken_for_the_slot FROM bgexec.await_work('rcw', '{rcc}', 1, '0');
SELECT job_id = :cb AS the_held_job FROM bgexec.claim('w', '{rcc}', 2);

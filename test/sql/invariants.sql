-- invariants: checks of DESIGN.md §1 that a mutation test of the SQL found
-- missing (each failed on a mutant that every other suite passed).
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
-- heartbeat_listed: heartbeat extends only the leases it lists.  A lease the
-- worker leaves out (it abandoned that run) is not kept alive by the
-- worker's heartbeats of its other runs: it expires, and reconcile takes
-- the job back (DESIGN.md §1.1, §1.7: failed, worker_lost, at max_attempts 1).
SELECT bgexec.register_worker('hbl', '{hbl}', 2);
SELECT count(bgexec.submit('noop', queue => 'hbl')) FROM generate_series(1, 2);
SELECT array_agg(lease ORDER BY lease) AS ks FROM bgexec.claim('hbl', '{hbl}', 2) \gset
UPDATE bgexec.job SET lease_expires_at = now() - interval '1 second' WHERE queue = 'hbl';
SELECT action FROM bgexec.heartbeat('hbl', (:'ks'::bigint[])[1:1]);
SELECT lease = (:'ks'::bigint[])[1] AS listed, lease_expires_at > now() AS extended
  FROM bgexec.job WHERE queue = 'hbl' ORDER BY id;
SELECT bgexec.reconcile() AS reconciled;
SELECT status, error->>'reason' AS reason, terminal_events(id)
  FROM bgexec.job WHERE queue = 'hbl' ORDER BY id;

-- claim_clock: a claim made late in a transaction (await_claim claims in the
-- transaction that waited for the wake, begun up to its timeout before)
-- counts the lease, the deadline and run_after on the claim's own clock,
-- not from the transaction's start: the lease is a whole lease_for from the
-- claim (a lease already spent when the worker got it let reconcile take
-- the job back, and another worker run it, while its worker had just
-- started it: DESIGN.md §1.2), and a job due since the transaction began is
-- claimed.
BEGIN;
SELECT pg_sleep(0.2);
SELECT bgexec.submit('noop', queue => 'cc', timeout => '1 minute',
                     run_after => clock_timestamp() - interval '0.1 seconds') AS cj \gset
SELECT count(*) AS claimed FROM bgexec.claim('w', '{cc}', 1);
SELECT status, started_at > now() AS started_on_claim_clock,
       lease_expires_at - started_at = interval '30 seconds' AS whole_lease,
       deadline - started_at = interval '1 minute' AS whole_timeout
  FROM bgexec.job WHERE id = :cj;
COMMIT;

-- completed_error: a job that completes after a failed attempt ends with its
-- result and no error (DESIGN.md §1.5: the terminal change writes its
-- result/error), by finish() and by finish_many() alike.
SELECT count(bgexec.submit('noop', queue => 'ce', max_attempts => 2, idempotency_key => 'ce-' || k)) AS submitted
  FROM unnest(ARRAY['finish', 'many']) k;
SELECT id AS jf FROM bgexec.job WHERE idempotency_key = 'ce-finish' \gset
SELECT id AS jm FROM bgexec.job WHERE idempotency_key = 'ce-many' \gset
-- attempt 1 of each fails (retryable): back to queued, the error kept meanwhile
SELECT count(bgexec.finish(job_id, lease, 'failed', '{"message": "transient"}'))
  FROM bgexec.claim('w', '{ce}', 2);
UPDATE bgexec.job SET run_after = now() WHERE queue = 'ce';
SELECT status, error->>'message' AS error FROM bgexec.job WHERE queue = 'ce' ORDER BY id;
-- attempt 2 completes: one by finish(), one by finish_many()
SELECT job_id AS c1, lease AS cl1 FROM bgexec.claim('w', '{ce}', 1) \gset
SELECT job_id AS c2, lease AS cl2 FROM bgexec.claim('w', '{ce}', 1) \gset
SELECT bgexec.finish(:jf, CASE WHEN :c1 = :jf THEN :cl1 ELSE :cl2 END, 'completed', '{"ok": 1}');
SELECT status FROM bgexec.finish_many(jsonb_build_array(jsonb_build_object(
	'job_id', :jm, 'lease', CASE WHEN :c1 = :jm THEN :cl1 ELSE :cl2 END,
	'outcome', 'completed', 'body', '{"ok": 2}'::jsonb)));
SELECT idempotency_key, status, attempt, result, error
  FROM bgexec.job WHERE queue = 'ce' ORDER BY id;
SELECT event_kinds(id), gapless(id), terminal_events(id) FROM bgexec.job WHERE queue = 'ce' ORDER BY id;

-- retry_live: retry() of a job that is not failed, cancelled or timed_out
-- (queued, running, suspended) returns false and changes nothing; a running
-- job keeps its lease, its worker's writes still apply (DESIGN.md §1.2,
-- §1.3).
SELECT bgexec.submit('noop', queue => 'rl') AS rr \gset
SELECT lease AS rl FROM bgexec.claim('w', '{rl}', 1) \gset
SELECT bgexec.submit('noop', queue => 'rl') AS rq \gset
SELECT bgexec.retry(:rr) AS retried_running, bgexec.retry(:rq) AS retried_queued;
SELECT id = :rr AS running_job, status, lease = :rl AS same_lease, attempt, event_kinds(id)
  FROM bgexec.job WHERE queue = 'rl' ORDER BY id;
SELECT bgexec.finish(:rr, :rl, 'completed', '{"ok": true}');
SELECT terminal_events(:rr), gapless(:rr);

-- terminal_guard: _terminal, the one writer of terminal states, refuses a job
-- that is already terminal (NULL, nothing written), whoever calls it: a
-- second terminal write would replace the result and add a second terminal
-- event (DESIGN.md §1.5).  Its callers check the status under the row lock
-- first; this is the check that holds should one of them not.
SELECT bgexec.submit('noop', queue => 'tg') AS tj \gset
SELECT bgexec.finish(job_id, lease, 'completed', '{"ok": true}') FROM bgexec.claim('w', '{tg}', 1);
SELECT bgexec._terminal(:tj, 'failed', NULL, '{"message": "late"}') IS NULL AS refused;
SELECT status, result, error, event_kinds(:tj), gapless(:tj), terminal_events(:tj)
  FROM bgexec.job WHERE id = :tj;
-- leave nothing to the suites after this one
DELETE FROM bgexec.job WHERE queue IN ('hbl', 'cc', 'ce', 'rl', 'tg');
DELETE FROM bgexec.worker WHERE id = 'hbl';
SELECT * FROM stats_mismatch();

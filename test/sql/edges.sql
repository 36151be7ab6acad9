-- edges: boundaries the other suites left open (found by mutation
-- testing).  Run after setup.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
-- 1. reconcile revokes a lease only once it has expired on the DB clock
--    (§1.2, §1.4, §1.7): exactly at now() it is still valid; a microsecond
--    before now() it is expired.  now() is fixed inside the transaction,
--    and reconcile compares with now(), so the boundary is exact.
SELECT bgexec.submit('noop', queue => 'edge') AS e1 \gset
SELECT bgexec.submit('noop', queue => 'edge') AS e2 \gset
SELECT count(*) FROM bgexec.claim('w-edge', '{edge}', 2, '1 hour');
BEGIN;
UPDATE bgexec.job SET lease_expires_at = now() WHERE id = :e1;
UPDATE bgexec.job SET lease_expires_at = now() + interval '2 seconds' WHERE id = :e2;
SELECT bgexec.reconcile() AS reconciled_at_boundary;
SELECT id = :e1 AS is_e1, status, error FROM bgexec.job WHERE id IN (:e1, :e2) ORDER BY id;
UPDATE bgexec.job SET lease_expires_at = now() - interval '1 microsecond' WHERE id = :e1;
SELECT bgexec.reconcile() AS reconciled_past_boundary;
SELECT id = :e1 AS is_e1, status, error->>'reason' AS reason FROM bgexec.job WHERE id IN (:e1, :e2) ORDER BY id;
COMMIT;
-- 2. a heartbeat refreshes the worker row (register_worker's takeover of an
--    id depends on it: a live worker whose heartbeat_at went stale loses its
--    id to a second process, and its jobs can then be given back by unclaim)
SELECT bgexec.register_worker('w-hb', '{edge}', 1, '{"host": "h", "pid": 1, "lease_s": 30}');
UPDATE bgexec.worker SET heartbeat_at = now() - interval '1 hour' WHERE id = 'w-hb';
SELECT count(*) FROM bgexec.heartbeat('w-hb', '{}', '30 s', '{"host": "h", "pid": 1}');
SELECT heartbeat_at > now() - interval '1 minute' AS refreshed FROM bgexec.worker WHERE id = 'w-hb';
-- so the id stays held: a second process is refused (55006)
SELECT * FROM try($$SELECT bgexec.register_worker('w-hb', '{edge}', 1, '{"host": "h", "pid": 2}')$$);
-- 3. a claim made late in a long transaction (await_claim claims in the
--    transaction that waited) leases for lease_for from the claim itself:
--    lease_expires_at - started_at = lease_for, both on clock_timestamp(),
--    not from the transaction's start (a lease shorter than asked, even
--    born expired, is revoked by reconcile while the worker runs it).
--    The claim comes 0.2 s at least after the transaction's start: its
--    lease runs to now() + 1.2 s or later; one from the start, to now() + 1 s.
SELECT bgexec.submit('noop', queue => 'edge-late') AS e3 \gset
BEGIN;
SELECT pg_sleep(0.2);
SELECT lease_expires_at > now() + interval '1.1 s' AS leased_from_claim
  FROM bgexec.claim('w-edge', '{edge-late}', 1, '1 second');
SELECT started_at > now() AS started_after_txn_start,
       lease_expires_at - started_at = interval '1 second' AS full_lease
  FROM bgexec.job WHERE id = :e3;
COMMIT;
-- 4. a retry's backoff pushes run_after forward, by the delay its event
--    reports (retries.sql bounds run_after from above only: with no backoff
--    at all it still passed).  With full jitter the delay is in [0, cap];
--    0 exactly has probability ~2^-52.
SELECT (bgexec.configure_queue('edge-retry', retry_base => '1 hour', retry_cap => '1 hour')).name;
SELECT bgexec.submit('noop', queue => 'edge-retry', max_attempts => 2) AS e4 \gset
SELECT lease AS l4 FROM bgexec.claim('w-edge', '{edge-retry}', 1) \gset
SELECT bgexec.finish(:e4, :l4, 'failed', '{"message": "transient"}');
SELECT j.status, j.run_after > e.created_at AS pushed_forward,
       abs(extract(epoch FROM j.run_after - e.created_at) * 1000 - (e.data->>'delay_ms')::numeric) <= 1 AS matches_event
  FROM bgexec.job j JOIN bgexec.job_event e ON e.job_id = j.id AND e.kind = 'retry_scheduled'
 WHERE j.id = :e4;
SELECT count(*) AS not_claimable_yet FROM bgexec.claim('w-edge', '{edge-retry}', 1);
-- 5. a job due later submitted through _submit_one (an idempotency key)
--    wakes a waiting worker when it is due, as submit's own path does
SELECT bgexec.submit('noop', queue => 'edge-due', run_after => now() + interval '300 ms',
                     idempotency_key => 'edge-due-1') AS e5 \gset
SELECT jobs FROM bgexec.await_work('w-due', '{edge-due}', 2, '0');
SELECT jobs FROM bgexec.await_work('w-due', '{edge-due}', 2, '10 seconds');
SELECT clock_timestamp() >= run_after AS due, clock_timestamp() - run_after < interval '5 seconds' AS on_time
  FROM bgexec.job WHERE id = :e5;
-- 6. an empty batch under a lease that is not current answers NULL, as any
--    other batch does (§1.3: a stale worker learns nothing it could take for
--    a live lease); under the current lease, the last seq
SELECT bgexec.submit('noop', queue => 'edge-empty') AS e6 \gset
SELECT lease AS l6 FROM bgexec.claim('w-edge', '{edge-empty}', 1) \gset
SELECT bgexec.append_events(:e6, :l6, '[]') AS current_empty,
       bgexec.append_events(:e6, :l6 - 1, '[]') IS NULL AS stale_empty_refused;
SELECT bgexec.finish(:e6, :l6, 'completed', '{}');
SELECT bgexec.append_events(:e6, :l6, '[]') IS NULL AS finished_empty_refused;
-- 7. retry gives a fresh run: a stop requested during the previous run does
--    not carry over (the retried run's first heartbeat said 'stop', and a
--    failure of it was never retried)
SELECT bgexec.submit('noop', queue => 'edge-stop', max_attempts => 2) AS e7 \gset
SELECT lease AS l7 FROM bgexec.claim('w-edge', '{edge-stop}', 1) \gset
SELECT bgexec.stop(:e7);
SELECT bgexec.finish(:e7, :l7, 'failed', '{"message": "stopped"}');
SELECT bgexec.retry(:e7);
SELECT lease AS l7b FROM bgexec.claim('w-edge', '{edge-stop}', 1) \gset
SELECT action FROM bgexec.heartbeat('w-edge', ARRAY[:l7b]::bigint[]) WHERE lease IS NOT NULL;
SELECT bgexec.finish(:e7, :l7b, 'failed', '{"message": "transient"}') AS retried_failure;
-- 8. claim returns at most max_jobs jobs across all its queues (the fast
--    path took max_jobs from each queue)
SELECT count(*) FROM (SELECT bgexec.submit('noop', queue => q)
                        FROM unnest(ARRAY['edge-m1', 'edge-m2', 'edge-m3']) q, generate_series(1, 2)) s;
SELECT count(*) AS claimed FROM bgexec.claim('w-edge', '{edge-m1,edge-m2,edge-m3}', 2);
SELECT count(*) AS claimed FROM bgexec.claim('w-edge', '{edge-m1,edge-m2,edge-m3}', 3);
SELECT count(*) FILTER (WHERE status = 'running') AS running, count(*) FILTER (WHERE status = 'queued') AS queued
  FROM bgexec.job WHERE queue LIKE 'edge-m_';
-- 9. the lease guard (a mutation test): a server start lease_epoch does not
--    name (a restart, a copy of the data directory started as it is) moves
--    lease_seq past every lease at a backend's first claim, and records the
--    start; a lease_seq already past the clock is kept
\c
UPDATE bgexec.lease_epoch SET started = started - interval '1 day';
SELECT setval('bgexec.lease_seq', 1000) AS reset;
SELECT bgexec.submit('noop', queue => 'edge-lg') > 0 AS submitted;
SELECT lease > 1000000 AS moved FROM bgexec.claim('w-edge', '{edge-lg}', 1);
SELECT started = pg_postmaster_start_time() AS recorded FROM bgexec.lease_epoch;
\c
UPDATE bgexec.lease_epoch SET started = started - interval '1 day';
SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint + 1000000000000 AS ahead \gset
SELECT setval('bgexec.lease_seq', :ahead) > 0 AS set_ahead;
SELECT bgexec.submit('noop', queue => 'edge-lg') > 0 AS submitted;
SELECT lease > :ahead AS kept FROM bgexec.claim('w-edge', '{edge-lg}', 1);
-- (back to the clock for the suites after this one, the jobs gone)
DELETE FROM bgexec.job WHERE queue = 'edge-lg';
SELECT setval('bgexec.lease_seq', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint) > 0 AS reset;

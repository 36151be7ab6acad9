-- fencing: every worker write names its lease; a stale lease changes nothing.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
SELECT bgexec.submit('noop', queue => 'fence', max_attempts => 2) AS j \gset
SELECT lease AS l1 FROM bgexec.claim('w1', '{fence}', 1) \gset
-- the worker vanishes; reconcile re-queues (attempts left); another worker claims
SELECT expire_lease(:j);
SELECT bgexec.reconcile();
UPDATE bgexec.job SET run_after = now() WHERE id = :j;
SELECT lease AS l2 FROM bgexec.claim('w2', '{fence}', 1) \gset
SELECT :l1 <> :l2 AS fresh_lease;
-- the stale worker (lease l1) is refused everywhere and changes nothing
SELECT last_seq AS before_seq FROM bgexec.job WHERE id = :j \gset
SELECT bgexec.append_event(:j, :l1, 'log', '{"lines": ["stale"]}') IS NULL AS event_refused;
SELECT bgexec.append_events(:j, :l1, '[{"kind": "progress", "data": {}}]') IS NULL AS events_refused;
SELECT bgexec.finish(:j, :l1, 'completed', '{"stale": true}') IS NULL AS finish_refused;
SELECT lease = :l1 AS same_lease, action FROM bgexec.heartbeat('w1', ARRAY[:l1]::bigint[]);
SELECT status, lease = :l2 AS current_lease, last_seq = :before_seq AS unchanged, result
  FROM bgexec.job WHERE id = :j;
-- the current worker finishes: failed, last attempt → terminal
SELECT bgexec.finish(:j, :l2, 'failed', '{"message": "boom"}');
-- a stale worker can never flip FAILED back to COMPLETED
SELECT bgexec.finish(:j, :l2, 'completed', '{}') IS NULL AS refused_after_terminal;
SELECT bgexec.finish(:j, :l1, 'completed', '{}') IS NULL AS refused_stale;
SELECT status, error->>'message' AS error, result FROM bgexec.job WHERE id = :j;
SELECT event_kinds(:j), gapless(:j), terminal_events(:j);
-- heartbeat: one statement for many leases; ok, stop, lost
SELECT count(bgexec.submit('noop', queue => 'hb')) FROM generate_series(1, 3);
SELECT bgexec.register_worker('w3', '{hb}', 3);
SELECT array_agg(lease ORDER BY lease) AS ls FROM bgexec.claim('w3', '{hb}', 3) \gset
SELECT bgexec.stop(id) FROM bgexec.job WHERE lease = (:'ls'::bigint[])[2];
SELECT lease_expires_at AS exp_before FROM bgexec.job WHERE lease = (:'ls'::bigint[])[1] \gset
SELECT pg_sleep(0.01);
SELECT action FROM bgexec.heartbeat('w3', :'ls'::bigint[] || ARRAY[-1]::bigint[]) ORDER BY lease;
SELECT lease_expires_at > :'exp_before' AS extended FROM bgexec.job WHERE lease = (:'ls'::bigint[])[1];
-- renewed from the call's time, as claim's lease, not from its transaction's
-- start: a worker of its own heartbeating in a transaction begun earlier
-- got a lease already past, answered ok
BEGIN;
SELECT pg_sleep(0.2);
SELECT action FROM bgexec.heartbeat('w3', (:'ls'::bigint[])[1:1], '1 s');
SELECT j.lease_expires_at > now() + interval '1.1 s' AS from_the_call, w.heartbeat_at > now() AS row_too
  FROM bgexec.job j, bgexec.worker w WHERE j.lease = (:'ls'::bigint[])[1] AND w.id = 'w3';
ROLLBACK;
-- another worker cannot heartbeat leases it does not own (and, unknown, is
-- asked to register)
SELECT DISTINCT action FROM bgexec.heartbeat('intruder', :'ls'::bigint[]) ORDER BY 1;
-- a worker whose row was deleted keeps its leases and is asked to register
-- again: one more row, lease NULL, action 'register'; then no more
DELETE FROM bgexec.worker WHERE id = 'w3';
SELECT lease = (:'ls'::bigint[])[1] AS first, action FROM bgexec.heartbeat('w3', (:'ls'::bigint[])[1:1]);
SELECT bgexec.register_worker('w3', '{hb}', 3);
SELECT action FROM bgexec.heartbeat('w3', (:'ls'::bigint[])[1:1]);
-- a process that lost the id (the row names another) renews its leases
-- but not the row: it neither keeps the new holder's row alive nor marks
-- live again one whose process stopped
SELECT bgexec.register_worker('w5', '{hb}', 3, '{"host": "h", "pid": 1}');
SELECT count(bgexec.submit('noop', queue => 'hb5'));
SELECT lease AS l5 FROM bgexec.claim('w5', '{hb5}', 1, '30 s', '{"host": "h", "pid": 1}') \gset
UPDATE bgexec.worker SET heartbeat_at = now() - interval '1 hour' WHERE id = 'w5';
SELECT bgexec.register_worker('w5', '{hb}', 3, '{"host": "h", "pid": 2}');
SELECT bgexec.deregister_worker('w5');
UPDATE bgexec.worker SET heartbeat_at = now() - interval '1 minute' WHERE id = 'w5';
SELECT action FROM bgexec.heartbeat('w5', ARRAY[:l5]::bigint[], '30 s', '{"host": "h", "pid": 1}');
SELECT pid, stopped_at IS NOT NULL AS stopped, heartbeat_at < now() - interval '59 seconds' AS not_refreshed
  FROM bgexec.worker WHERE id = 'w5';
SELECT action FROM bgexec.heartbeat('w5', ARRAY[:l5]::bigint[], '30 s', '{"host": "h", "pid": 2}');
SELECT pid, stopped_at IS NOT NULL AS stopped FROM bgexec.worker WHERE id = 'w5';
-- its pid as a number: 2.0 is pid 2
SELECT bgexec.deregister_worker('w5');
SELECT action FROM bgexec.heartbeat('w5', ARRAY[:l5]::bigint[], '30 s', '{"host": "h", "pid": 2.0}');
SELECT pid, stopped_at IS NOT NULL AS stopped FROM bgexec.worker WHERE id = 'w5';
-- a row its own process stopped (deregister_worker with process) stays
-- stopped: its heartbeat (sent before, committed after) renews the leases
-- it still holds but not the row, nor asks it to register; register_worker
-- clears the stop
SELECT bgexec.deregister_worker('w5', '{"host": "h", "pid": 2}');
UPDATE bgexec.worker SET heartbeat_at = now() - interval '1 minute' WHERE id = 'w5';
SELECT action FROM bgexec.heartbeat('w5', ARRAY[:l5]::bigint[], '30 s', '{"host": "h", "pid": 2}');
SELECT count(*) AS rows FROM bgexec.heartbeat('w5', '{}', '30 s', NULL);
SELECT pid, stopped_at IS NOT NULL AS stopped, stopped_by_self, heartbeat_at < now() - interval '59 seconds' AS not_refreshed
  FROM bgexec.worker WHERE id = 'w5';
SELECT bgexec.register_worker('w5', '{hb}', 3, '{"host": "h", "pid": 2}');
SELECT action FROM bgexec.heartbeat('w5', ARRAY[:l5]::bigint[], '30 s', '{"host": "h", "pid": 2}');
SELECT pid, stopped_at IS NOT NULL AS stopped, stopped_by_self FROM bgexec.worker WHERE id = 'w5';
SELECT * FROM try($$SELECT bgexec.heartbeat('w5', '{}', '30 s', '{"host": "h"}')$$);
-- finish_many: many guarded finishes in one statement; refused leases get NULL
SELECT count(bgexec.submit('noop', queue => 'fm', max_attempts => 2)) FROM generate_series(1, 3);
SELECT array_agg(job_id ORDER BY job_id) AS fj, array_agg(lease ORDER BY job_id) AS fl
  FROM bgexec.claim('w4', '{fm}', 3) \gset
SELECT job_id = (:'fj'::bigint[])[1] AS first, status
  FROM bgexec.finish_many(jsonb_build_array(
         jsonb_build_object('job_id', (:'fj'::bigint[])[1], 'lease', (:'fl'::bigint[])[1], 'outcome', 'completed', 'body', '{"n": 1}'::jsonb),
         jsonb_build_object('job_id', (:'fj'::bigint[])[2], 'lease', (:'fl'::bigint[])[2], 'outcome', 'failed', 'body', '{"message": "x"}'::jsonb),
         jsonb_build_object('job_id', (:'fj'::bigint[])[3], 'lease', -1, 'outcome', 'completed')));
SELECT status, result, terminal_events(id), gapless(id) FROM bgexec.job WHERE queue = 'fm' ORDER BY id;
-- every outcome but completed goes through _terminal (or suspends), and
-- each is an item finish_many takes
SELECT count(bgexec.submit('noop', queue => 'fo')) FROM generate_series(1, 3);
SELECT array_agg(job_id ORDER BY job_id) AS oj, array_agg(lease ORDER BY job_id) AS ol
  FROM bgexec.claim('w4', '{fo}', 3) \gset
SELECT status FROM bgexec.finish_many(jsonb_build_array(
         jsonb_build_object('job_id', (:'oj'::bigint[])[1], 'lease', (:'ol'::bigint[])[1], 'outcome', 'cancelled'),
         jsonb_build_object('job_id', (:'oj'::bigint[])[2], 'lease', (:'ol'::bigint[])[2], 'outcome', 'timed_out'),
         jsonb_build_object('job_id', (:'oj'::bigint[])[3], 'lease', (:'ol'::bigint[])[3], 'outcome', 'suspended', 'body', '{"step": "g"}'::jsonb)));
SELECT status, terminal_events(id), gapless(id) FROM bgexec.job WHERE queue = 'fo' ORDER BY id;
-- the same batch again: every lease is refused now, nothing changes
SELECT status FROM bgexec.finish_many(jsonb_build_array(
         jsonb_build_object('job_id', (:'fj'::bigint[])[1], 'lease', (:'fl'::bigint[])[1], 'outcome', 'failed')));
-- several items for one job and lease: as finish() calls in array order,
-- the first applies and reports its status, the others are refused (NULL);
-- a completion after a failure, a failure after a completion, and a second
-- completion with another result
SELECT count(bgexec.submit('noop', queue => 'fd', max_attempts => 2)) FROM generate_series(1, 2);
SELECT array_agg(job_id ORDER BY job_id) AS dj, array_agg(lease ORDER BY job_id) AS dl
  FROM bgexec.claim('w4', '{fd}', 2) \gset
SELECT t.ord, t.job_id = (:'dj'::bigint[])[1] AS first_job, t.status
  FROM bgexec.finish_many(jsonb_build_array(
         jsonb_build_object('job_id', (:'dj'::bigint[])[1], 'lease', (:'dl'::bigint[])[1], 'outcome', 'completed', 'body', '{"r": 1}'::jsonb),
         jsonb_build_object('job_id', (:'dj'::bigint[])[1], 'lease', (:'dl'::bigint[])[1], 'outcome', 'failed'),
         jsonb_build_object('job_id', (:'dj'::bigint[])[1], 'lease', (:'dl'::bigint[])[1], 'outcome', 'completed', 'body', '{"r": 2}'::jsonb),
         jsonb_build_object('job_id', (:'dj'::bigint[])[2], 'lease', (:'dl'::bigint[])[2], 'outcome', 'failed'),
         jsonb_build_object('job_id', (:'dj'::bigint[])[2], 'lease', (:'dl'::bigint[])[2], 'outcome', 'completed')))
       WITH ORDINALITY AS t(job_id, lease, status, ord)
 ORDER BY t.ord;
SELECT status, result, attempt, event_kinds(id), terminal_events(id), gapless(id)
  FROM bgexec.job WHERE queue = 'fd' ORDER BY id;
-- negative: an item without a valid outcome
SELECT * FROM bgexec.finish_many('[{"job_id": 1, "lease": 1, "outcome": "running"}]');
SELECT * FROM bgexec.finish_many('{}');
-- negative: the first bad item is named by its position and field (a string
-- job_id was blamed on the outcome, a missing lease passed the check), a
-- number that is no bigint too (it failed in the cast, 22P02 or 22003
-- naming neither): 1.0 is not one (bigint's input refuses it), 1e3 is
SELECT * FROM bgexec.finish_many('[{"job_id": 1, "lease": 1, "outcome": "completed"}, {"job_id": "49", "lease": 1, "outcome": "completed"}]');
SELECT * FROM bgexec.finish_many('[{"job_id": 1.5, "lease": 1, "outcome": "completed"}]');
SELECT * FROM bgexec.finish_many('[{"job_id": 1e30, "lease": 1, "outcome": "completed"}]');
SELECT * FROM bgexec.finish_many('[{"job_id": 1, "lease": 1, "outcome": "completed"}, {"job_id": 1.0, "lease": 1, "outcome": "completed"}]');
SELECT * FROM bgexec.finish_many('[{"job_id": 9223372036854775808, "lease": 1, "outcome": "completed"}]');
SELECT * FROM bgexec.finish_many('[{"job_id": 1, "lease": -9223372036854775809, "outcome": "completed"}]');
SELECT * FROM bgexec.finish_many('[{"job_id": 1, "lease": 2.50, "outcome": "completed"}]');
SELECT * FROM bgexec.finish_many('[{"job_id": 1, "lease": 1, "outcome": {"completed": true}}]');
SELECT * FROM bgexec.finish_many('[{"job_id": 1, "lease": 1, "outcome": "completed", "it''s": 1}]');
SELECT * FROM bgexec.finish_many('[{"job_id": 9223372036854775807, "lease": -9223372036854775808, "outcome": "completed"}, {"job_id": 1e3, "lease": 0, "outcome": "failed", "body": null}]');
SELECT * FROM bgexec.finish_many('[{"job_id": 1, "outcome": "completed"}]');
SELECT * FROM bgexec.finish_many('[{"job_id": 1, "lease": 1}]');
SELECT * FROM bgexec.finish_many('[{"job_id": 1, "lease": 1, "outcome": "completed"}, 7]');
-- negative: an unknown key, named (a "result" beside or instead of "body"
-- was dropped, and the job completed with {}); nothing is written
SELECT bgexec.submit('noop', queue => 'fk') AS kj \gset
SELECT lease AS kl FROM bgexec.claim('w4', '{fk}', 1) \gset
SELECT * FROM bgexec.finish_many(jsonb_build_array(
         jsonb_build_object('job_id', :kj, 'lease', :kl, 'outcome', 'completed', 'result', '{"n": 1}'::jsonb)));
SELECT * FROM bgexec.finish_many(jsonb_build_array(
         jsonb_build_object('job_id', :kj, 'lease', :kl, 'outcome', 'completed', 'body', '{"n": 1}'::jsonb),
         jsonb_build_object('job_id', :kj, 'lease', :kl, 'outcome', 'failed', 'Body', '{}'::jsonb)));
SELECT status, result, terminal_events(id) FROM bgexec.job WHERE id = :kj;
SELECT status FROM bgexec.finish_many(jsonb_build_array(
         jsonb_build_object('job_id', :kj, 'lease', :kl, 'outcome', 'completed', 'body', '{"n": 1}'::jsonb)));
SELECT status, result, terminal_events(id) FROM bgexec.job WHERE id = :kj;

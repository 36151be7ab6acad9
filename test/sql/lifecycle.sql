-- lifecycle: submit → claim → events → finish; the happy path and its invariants.
\set SHOW_CONTEXT never
SELECT bgexec.submit('noop') AS j1 \gset
SELECT bgexec.submit('noop', '{"x": 1}', queue => 'other', priority => 5) AS j2 \gset
SELECT status, queue, kind, owner = current_user AS mine, attempt, max_attempts, lease IS NULL AS no_lease
  FROM bgexec.job WHERE id IN (:j1, :j2) ORDER BY id;
-- claim takes only the requested queues, highest priority first
SELECT count(*) FROM bgexec.claim('w1', '{nosuchqueue}', 10);
SELECT job_id = :j1 AS is_j1, kind, payload, attempt, completed_steps, deadline IS NULL AS no_deadline,
       lease_expires_at > now() AS leased
  FROM bgexec.claim('w1', '{default}', 10) \gset c_
SELECT :'c_is_j1', :'c_kind', :'c_attempt', :'c_completed_steps';
SELECT lease AS l1 FROM bgexec.job WHERE id = :j1 \gset
SELECT status, lease_owner, attempt, started_at IS NOT NULL AS started FROM bgexec.job WHERE id = :j1;
-- a claimed job is not claimed again
SELECT count(*) FROM bgexec.claim('w2', '{default}', 10);
-- events under the lease get the next seqs
SELECT bgexec.append_event(:j1, :l1, 'progress', '{"pct": 50}');
SELECT bgexec.append_events(:j1, :l1, '[{"kind": "log", "data": {"lines": ["a"]}}, {"kind": "log", "data": {"lines": ["b"]}}]');
SELECT bgexec.finish(:j1, :l1, 'completed', '{"ok": true}');
SELECT status, result, error, finished_at IS NOT NULL AS finished, lease IS NULL AS released
  FROM bgexec.job WHERE id = :j1;
SELECT seq, kind, data - 'lease' AS data FROM bgexec.events(:j1) ORDER BY seq;
SELECT seq, kind FROM bgexec.events(:j1, after_seq => 3) ORDER BY seq;
SELECT gapless(:j1), terminal_events(:j1);
-- a second finish under the same lease is refused and changes nothing
SELECT bgexec.finish(:j1, :l1, 'failed', '{"message": "late"}') IS NULL AS refused;
SELECT status, result FROM bgexec.job WHERE id = :j1;
-- priority order across queues: higher priority first, then run_after, then id
SELECT bgexec.submit('noop', queue => 'other', priority => 1) AS j3 \gset
SELECT bgexec.submit('noop', queue => 'other', priority => 9) AS j4 \gset
SELECT array_agg(job_id ORDER BY ord) = ARRAY[:j4, :j2, :j3]::bigint[] AS priority_order
  FROM (SELECT job_id, row_number() OVER () AS ord FROM bgexec.claim('w1', '{other}', 10)) c;
-- run_after in the future: not claimable yet
SELECT bgexec.submit('noop', queue => 'later', run_after => now() + interval '1 hour') AS j5 \gset
SELECT count(*) FROM bgexec.claim('w1', '{later}', 10);
-- paused queues are skipped
SELECT bgexec.submit('noop', queue => 'paused_q') AS j6 \gset
SELECT paused FROM bgexec.configure_queue('paused_q', paused => true);
SELECT count(*) FROM bgexec.claim('w1', '{paused_q}', 10);
SELECT paused FROM bgexec.configure_queue('paused_q', paused => false);
SELECT count(*) FROM bgexec.claim('w1', '{paused_q}', 10);
-- several queues: a paused one is skipped, the others merged in claim order;
-- duplicate and NULL queue names change nothing
SELECT bgexec.submit('noop', queue => 'mq-a', priority => 1) AS ma \gset
SELECT bgexec.submit('noop', queue => 'mq-b', priority => 5) AS mb \gset
SELECT bgexec.submit('noop', queue => 'mq-p', priority => 9) AS mp \gset
SELECT paused FROM bgexec.configure_queue('mq-p', paused => true);
SELECT array_agg(job_id ORDER BY ord) = ARRAY[:mb, :ma]::bigint[] AS merged_without_paused
  FROM (SELECT job_id, row_number() OVER () AS ord
          FROM bgexec.claim('w1', ARRAY['mq-a', 'mq-p', NULL, 'mq-b', 'mq-a'], 10)) c;
SELECT count(*) AS only_paused FROM bgexec.claim('w1', '{mq-p}', 10);
SELECT count(*) AS no_queues FROM bgexec.claim('w1', '{}', 10);
SELECT count(*) AS null_queue FROM bgexec.claim('w1', ARRAY[NULL]::text[], 10);
SELECT paused FROM bgexec.configure_queue('mq-p', paused => false);
SELECT count(*) AS unpaused FROM bgexec.claim('w1', '{mq-p}', 10);
-- batch claim: at most max_jobs
SELECT count(*) FROM (SELECT bgexec.submit('noop', queue => 'batch') FROM generate_series(1, 5)) s;
SELECT count(*) FROM bgexec.claim('w1', '{batch}', 3);
SELECT count(*) FROM bgexec.claim('w1', '{batch}', 3);
-- every claim takes a fresh, unique lease
SELECT count(DISTINCT lease) = count(*) AS unique_leases FROM bgexec.job WHERE status = 'running';
-- submit_many: one statement, ids in order
SELECT count(*) FROM bgexec.submit_many('[{"kind": "noop", "queue": "many"}, {"kind": "noop", "queue": "many", "priority": 3}]');
SELECT kind, priority FROM bgexec.job WHERE queue = 'many' ORDER BY id;
-- negative: submit_many with an unknown field
SELECT bgexec.submit_many('[{"kind": "noop", "prio": 3}]');
-- negative: claim with max_jobs < 1 or a non-positive lease
SELECT * FROM bgexec.claim('w1', '{default}', 0);
SELECT * FROM bgexec.claim('w1', '{default}', 1, '0 s');
-- negative: max_jobs over 10000 (on a capped queue the candidate scan's
-- max_jobs * 4 + 100 overflowed: 22003), a lease over a day (22008 at
-- now() + lease_for), in claim and in heartbeat
SELECT (bgexec.configure_queue('lcap', max_running => 5)).name;
SELECT * FROM bgexec.claim('w1', '{lcap}', 2147483647);
SELECT * FROM bgexec.claim('w1', '{default}', 10001);
SELECT * FROM bgexec.claim('w1', '{default}', 1, '300000 years');
SELECT * FROM bgexec.claim('w1', '{default}', 1, '1 day 1 second');
SELECT * FROM bgexec.heartbeat('w1', '{}', '300000 years');
-- negative: queues NULL (it claimed nothing, silently) or two-dimensional
-- (claimed from as a flat list), as await_work refuses them; a NULL lease
-- in heartbeat (its answer (NULL, 'lost') looked like the 'register' row);
-- a NULL list in heartbeat (it renewed nothing, and refreshed the worker)
\set VERBOSITY terse
SELECT * FROM bgexec.claim('w1', NULL, 1);
SELECT * FROM bgexec.claim('w1', '{{default,many},{other,x}}', 1);
SELECT * FROM bgexec.heartbeat('w1', '{NULL}');
SELECT * FROM bgexec.heartbeat('w1', NULL);
SELECT * FROM bgexec.heartbeat('w1', '{{1},{2}}');
\set VERBOSITY default
-- each part bounded and none negative: these compare as a day or less, but
-- made a lease of 525 days, a timestamp out of range (22008), a lease that
-- ends before it starts (from 31 January)
SELECT * FROM bgexec.claim('w1', '{default}', 1, '100 years -35999 days');
SELECT * FROM bgexec.claim('w1', '{default}', 1, '71582788 mons -2147483639 days');
SELECT * FROM bgexec.heartbeat('w1', '{}', '1 mon -29 days 12:00');
SELECT count(*) FROM bgexec.claim('w1', '{lcap}', 10000, '1 day');
-- negative: finish with a non-terminal outcome
SELECT bgexec.finish(:j1, :l1, 'running', NULL);
-- negative: a worker cannot append DB-owned event kinds
SELECT bgexec.append_event(:j1, :l1, 'completed', '{}');
-- register_worker / deregister_worker / worker_stats
SELECT bgexec.register_worker('w1', '{default,other}', 4, '{"host": "h1", "pid": 42}');
SELECT id, host, pid, queues, concurrency, alive, in_flight > 0 AS busy FROM bgexec.worker_stats ORDER BY id;
SELECT bgexec.deregister_worker('w1');
-- negative: info not an object (it was accepted), a pid that is not an
-- integer (22P02, 22003 from a cast)
SELECT bgexec.register_worker('w1', '{default}', 4, '[1]');
SELECT bgexec.register_worker('w1', '{default}', 4, '{"pid": "abc"}');
SELECT bgexec.register_worker('w1', '{default}', 4, '{"pid": 1.5}');
SELECT bgexec.register_worker('w1', '{default}', 4, '{"pid": 99999999999}');
-- negative: queues as claim takes them (they were stored as given), a host
-- that is not a string (stored as its JSON text)
SELECT bgexec.register_worker('w1', '{{a},{b}}', 4);
SELECT bgexec.register_worker('w1', NULL, 4);
SELECT bgexec.register_worker('w1', '{default,NULL}', 4);
SELECT bgexec.register_worker('w1', '{"bad queue"}', 4);
SELECT bgexec.register_worker('w1', '{default}', 4, '{"host": {"a": 1}}');
-- negative: an empty worker_id (heartbeat answered with a register row for
-- an id register_worker refuses; deregister did nothing)
SELECT * FROM bgexec.heartbeat('', '{}');
SELECT * FROM bgexec.heartbeat(NULL, '{1}');
-- nor one longer than register_worker takes, counted in characters (claim
-- stored it in each job's lease_owner, at any length)
SELECT * FROM bgexec.heartbeat(repeat('w', 201), '{}');
SELECT * FROM bgexec.claim('', '{default}', 1);
SELECT * FROM bgexec.claim(repeat('é', 201), '{nosuch}', 1);
SELECT count(*) FROM bgexec.claim(repeat('é', 200), '{nosuch}', 1);
SELECT bgexec.deregister_worker('');
-- a null or absent pid is no pid
SELECT bgexec.register_worker('w2', '{default}', 1, '{"pid": null}'), bgexec.register_worker('w3', '{default}', 1);
-- (the refused registrations changed nothing: w1 is still deregistered)
SELECT id, pid, stopped_at IS NULL AS running FROM bgexec.worker_stats WHERE id IN ('w1', 'w2', 'w3') ORDER BY id;
DELETE FROM bgexec.worker WHERE id IN ('w2', 'w3');
-- one live process per worker id (leases, heartbeat and unclaim go by the
-- id): another process's registration of a live id is refused (55006,
-- holder named, nothing changed) unless the holder stopped, named no
-- process, is the caller, missed its lease, or is the pid the caller found
-- gone on its own host (info.replaces)
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 10, "lease_s": 60}');
SELECT bgexec.register_worker('one', '{default}', 2, '{"host": "h1", "pid": 10, "lease_s": 60}');
-- (the DETAIL's heartbeat age, in tenths of a second, varies with the machine)
DO $$
DECLARE d text; h text;
BEGIN
	PERFORM bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 11}');
EXCEPTION WHEN object_in_use THEN
	GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
	RAISE NOTICE '55006: % / %', regexp_replace(d, '[0-9.]+ s ago', 'N s ago'), h;
END
$$;
-- a holder's heartbeat less than its lease (60 s) ahead still holds the id
UPDATE bgexec.worker SET heartbeat_at = now() + interval '30 s' WHERE id = 'one';
DO $$
DECLARE d text;
BEGIN
	PERFORM bgexec.register_worker('one', '{default}', 1, '{"host": "h2", "pid": 11}');
EXCEPTION WHEN object_in_use THEN
	GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
	RAISE NOTICE '55006: %', regexp_replace(d, '[0-9.]+ s ago', 'N s ago');
END
$$;
-- one more than a lease ahead does not: it is what a step of the database
-- clock back leaves, and it kept the id of a worker restarted on another
-- host refused for the step's length; nor one written by hand at infinity
-- (past the functions); both taken over (rolled back here)
BEGIN;
UPDATE bgexec.worker SET heartbeat_at = now() + interval '1 hour' WHERE id = 'one';
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h2", "pid": 11}');
SELECT host, pid, heartbeat_at = now() AS rebased FROM bgexec.worker WHERE id = 'one';
ROLLBACK;
BEGIN;
UPDATE bgexec.worker SET heartbeat_at = 'infinity' WHERE id = 'one';
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h2", "pid": 11}');
SELECT host, pid FROM bgexec.worker WHERE id = 'one';
ROLLBACK;
UPDATE bgexec.worker SET heartbeat_at = now() WHERE id = 'one';
\set VERBOSITY terse
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h2", "pid": 10}');
SELECT bgexec.register_worker('one', '{default}', 1, '{}');
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h2", "pid": 11, "replaces": 10}');
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 11, "replaces": "10"}');
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 11, "replaces": 1.5}');
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 11, "replaces": 1e300}');
SELECT host, pid, concurrency FROM bgexec.worker WHERE id = 'one';
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 11, "replaces": 10}');
SELECT host, pid FROM bgexec.worker WHERE id = 'one';
-- a pid is an integral number, 7 and 7.0 alike (info.pid, info.replaces)
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 15.0, "replaces": 11.0}');
SELECT host, pid FROM bgexec.worker WHERE id = 'one';
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 15e0}');
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 2147483648}');
-- info.lease_s: a microsecond to a day (1e-400 was stored, and every later
-- registration of the id failed reading it as a double: 22003)
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 15, "lease_s": 1e-400}');
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 15, "lease_s": 0}');
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 15, "lease_s": 86401}');
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 15, "lease_s": "30"}');
-- (a row written by hand with one is read as a microsecond)
UPDATE bgexec.worker SET info = info || '{"lease_s": 1e-400}' WHERE id = 'one';
SELECT bgexec._lease_s(info) FROM bgexec.worker WHERE id = 'one';
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 15}');
SELECT host, pid FROM bgexec.worker WHERE id = 'one';
-- missed its lease (60 s above; 30 s when the info gives none)
UPDATE bgexec.worker SET heartbeat_at = now() - interval '25 s' WHERE id = 'one';
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 12}');
UPDATE bgexec.worker SET heartbeat_at = now() - interval '35 s' WHERE id = 'one';
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h1", "pid": 12}');
SELECT bgexec.deregister_worker('one');
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h3", "pid": 13}');
UPDATE bgexec.worker SET host = NULL WHERE id = 'one';
SELECT bgexec.register_worker('one', '{default}', 1, '{"host": "h4", "pid": 14}');
SELECT host, pid FROM bgexec.worker WHERE id = 'one';
\set VERBOSITY default
DELETE FROM bgexec.worker WHERE id = 'one';
SELECT id, stopped_at IS NOT NULL AS stopped, alive FROM bgexec.worker_stats ORDER BY id;
SELECT queue, queued, running, completed FROM bgexec.queue_stats ORDER BY queue;

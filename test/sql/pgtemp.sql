-- pgtemp: a client's or a worker's temporary objects never run as the
-- extension owner.  PostgreSQL searches the session's temporary schema
-- first for types and relations unless search_path names pg_temp, so every
-- bgexec function pins pg_catalog, bgexec, pg_temp.  Here a client arms
-- pg_temp domains over the types the function bodies name, each with a CHECK
-- that raises naming current_user, then calls every function a client and a
-- worker may call, on every path: a trap that fired would print its role.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
-- the jobs the calls below act on, made before any trap exists
SELECT (bgexec.configure_queue('tmp-cap', max_running => 10, max_running_per_key => 5)).name;
SET ROLE regress_alice;
SELECT bgexec.submit('noop', queue => 'tmp-c') AS cr \gset
SELECT bgexec.submit('noop', queue => 'tmp-c') AS cs \gset
SELECT bgexec.submit('noop', queue => 'tmp-c') AS cf \gset
SELECT bgexec.submit('noop', queue => 'tmp-c') AS cp \gset
SELECT bgexec.submit('noop', queue => 'tmp-c') AS cq \gset
SELECT count(*) FROM bgexec.submit_many('[{"kind": "noop", "queue": "tmp-w", "max_attempts": 2},
  {"kind": "noop", "queue": "tmp-w", "max_attempts": 2}, {"kind": "noop", "queue": "tmp-w"},
  {"kind": "noop", "queue": "tmp-w"}, {"kind": "noop", "queue": "tmp-w"},
  {"kind": "noop", "queue": "tmp-w2"}, {"kind": "noop", "queue": "tmp-cap", "concurrency_key": "k"},
  {"kind": "noop", "queue": "tmp-old", "max_attempts": 2}, {"kind": "noop", "queue": "tmp-old"},
  {"kind": "noop", "queue": "tmp-old", "timeout": "1 hour"}]');
SELECT bgexec.schedule('tmp-due', '* * * * *', 'noop', queue => 'tmp-s') IS NOT NULL AS due_soon;
RESET ROLE;
-- a schedule due, for reconcile to fire under the traps
UPDATE bgexec.schedule SET next_run_at = now() - interval '1 minute' WHERE name = 'tmp-due';
SELECT count(*) FROM bgexec.claim('w-old', '{tmp-c}', 4);
SELECT bgexec.finish(:cs, (SELECT lease FROM bgexec.job WHERE id = :cs), 'suspended', '{}'),
       bgexec.finish(:cf, (SELECT lease FROM bgexec.job WHERE id = :cf), 'failed', '{}'),
       bgexec.finish(:cp, (SELECT lease FROM bgexec.job WHERE id = :cp), 'completed', '{}');
UPDATE bgexec.job SET finished_at = now() - interval '1 day' WHERE id = :cp;
-- five leases of the worker's
SELECT job_id AS w1, lease AS l1 FROM bgexec.claim('w-tmp', '{tmp-w}', 1) \gset
SELECT job_id AS w2, lease AS l2 FROM bgexec.claim('w-tmp', '{tmp-w}', 1) \gset
SELECT job_id AS w3, lease AS l3 FROM bgexec.claim('w-tmp', '{tmp-w}', 1) \gset
SELECT job_id AS w4, lease AS l4 FROM bgexec.claim('w-tmp', '{tmp-w}', 1) \gset
SELECT job_id AS w5, lease AS l5 FROM bgexec.claim('w-tmp', '{tmp-w}', 1) \gset
-- the watchdog's work: two expired leases (one with an attempt left), a deadline passed
SELECT count(*) FROM bgexec.claim('w-old', '{tmp-old}', 3);
UPDATE bgexec.job SET lease_expires_at = now() - interval '1 second' WHERE queue = 'tmp-old' AND timeout IS NULL;
UPDATE bgexec.job SET deadline = now() - interval '1 second' WHERE queue = 'tmp-old' AND timeout IS NOT NULL;
-- a new session: no function of it has run yet, so none has resolved a type
\c
SET ROLE regress_alice;
CREATE FUNCTION pg_temp.trap(v anyelement) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'trap: a temporary domain''s check ran as %', current_user;
END $$;
CREATE DOMAIN pg_temp.text AS pg_catalog.text CHECK (pg_temp.trap(VALUE));
CREATE DOMAIN pg_temp.jsonb AS pg_catalog.jsonb CHECK (pg_temp.trap(VALUE));
CREATE DOMAIN pg_temp.json AS pg_catalog.json CHECK (pg_temp.trap(VALUE));
CREATE DOMAIN pg_temp.name AS pg_catalog.name CHECK (pg_temp.trap(VALUE));
CREATE DOMAIN pg_temp.timestamptz AS pg_catalog.timestamptz CHECK (pg_temp.trap(VALUE));
CREATE DOMAIN pg_temp."interval" AS pg_catalog.interval CHECK (pg_temp.trap(VALUE));
CREATE DOMAIN pg_temp.int4 AS pg_catalog.int4 CHECK (pg_temp.trap(VALUE));
CREATE DOMAIN pg_temp.int8 AS pg_catalog.int8 CHECK (pg_temp.trap(VALUE));
CREATE DOMAIN pg_temp.bool AS pg_catalog.bool CHECK (pg_temp.trap(VALUE));
CREATE DOMAIN pg_temp.float8 AS pg_catalog.float8 CHECK (pg_temp.trap(VALUE));
CREATE DOMAIN pg_temp."numeric" AS pg_catalog.numeric CHECK (pg_temp.trap(VALUE));
CREATE DOMAIN pg_temp.xid AS pg_catalog.xid CHECK (pg_temp.trap(VALUE));
CREATE DOMAIN pg_temp.job_status AS bgexec.job_status CHECK (pg_temp.trap(VALUE));
-- the trap is armed: the client's own cast to text runs it, as the client
SELECT 'x'::text;
-- client functions, on each of their paths: nothing runs as the owner
SELECT bgexec.submit('noop', '{"a": 1}', queue => 'tmp-c', run_after => now(), timeout => '1 hour',
                     idempotency_key => 'tmp-k', concurrency_key => 'k') > 0 AS submitted;
SELECT count(*) AS fast_path FROM bgexec.submit_many('[{"kind": "noop", "queue": "tmp-c", "payload": {"a": 1},
  "priority": 1, "run_after": "2000-01-01", "max_attempts": 2, "timeout": "1 hour", "concurrency_key": "k"}]');
SELECT count(*) AS per_job_path FROM bgexec.submit_many('[{"kind": "noop", "queue": "tmp-c", "idempotency_key": "tmp-m",
  "priority": 1, "run_after": "2000-01-01", "max_attempts": 2, "timeout": "1 hour", "concurrency_key": "k"}]');
SELECT bgexec.stop(:cq) AS stop_queued, bgexec.stop(:cr) AS stop_running;
SELECT bgexec.resume(:cs, '{"ok": true}') AS resumed;
SELECT bgexec.retry(:cf) AS retried;
SELECT count(*) AS events FROM bgexec.events(:cr);
SELECT bgexec.purge('1 hour', 1) AS purged_in_a_batch, bgexec.purge('1 hour') AS purged_the_rest;
SELECT bgexec.schedule('tmp-s', '*/5 1-2 * jan,feb mon', 'noop', '{"a": 1}', queue => 'tmp-s',
                       timeout => '1 hour', concurrency_key => 'k') > now() AS scheduled;
SELECT bgexec.schedule('tmp-s', '@daily', 'noop', queue => 'tmp-s') > now() AS rescheduled;
SELECT bgexec.schedule('tmp-t', '@hourly', 'noop', queue => 'tmp-s') > now() AS scheduled_too;
SELECT bgexec.unschedule('tmp-t') AS unscheduled;
SELECT bgexec._inserted_here(:cq) AS inserted_here, bgexec._can_see('regress_alice') AS can_see,
       bgexec._caller() AS caller;
SELECT count(*) > 0 AS queue_stats FROM bgexec.queue_stats;
SELECT count(*) >= 0 AS worker_stats FROM bgexec.worker_stats;
-- worker functions, on each of their paths, as the worker
RESET ROLE;
SET ROLE regress_worker;
SELECT bgexec.register_worker('w-tmp', '{tmp-w,tmp-cap}', 8, '{"host": "h", "pid": 1}');
SELECT count(*) AS claimed FROM bgexec.claim('w-tmp', '{tmp-w2}', 5);
SELECT count(*) AS capped_claim FROM bgexec.claim('w-tmp', '{tmp-cap}', 5);
-- the two jobs just claimed, as if their reply had been lost
SELECT bgexec.unclaim('w-tmp', 0, ARRAY[:l1, :l2, :l3, :l4, :l5]) AS unclaimed;
SELECT action, count(*) FROM bgexec.heartbeat('w-tmp', ARRAY[:l1, :l2, :l3, :l4, :l5]) GROUP BY 1;
SELECT bgexec.append_event(:w1, :l1, 'log', '{"line": "x"}') AS appended;
SELECT bgexec.append_events(:w1, :l1, '[{"kind": "progress", "data": {"pct": 50}}]', after_seq => 1) AS appended_after;
SELECT bgexec.finish(:w1, :l1, 'completed', '{"ok": true}') AS completed,
       bgexec.finish(:w2, :l2, 'failed', '{"message": "again"}') AS failed_with_attempts_left,
       bgexec.finish(:w3, :l3, 'suspended', '{"step": "s"}') AS suspended;
SELECT status FROM bgexec.finish_many(jsonb_build_array(
	jsonb_build_object('job_id', :w4, 'lease', :l4, 'outcome', 'completed'),
	jsonb_build_object('job_id', :w5, 'lease', :l5, 'outcome', 'failed'))) ORDER BY job_id;
SELECT count(*) AS nothing FROM bgexec.finish_many('[]');
SELECT bgexec.reconcile() AS reconciled;
SELECT bgexec.deregister_worker('w-tmp');
RESET ROLE;
-- the traps go; what the calls did, as the owner
DISCARD TEMP;
SELECT queue, status, count(*) FROM bgexec.job WHERE queue LIKE 'tmp-%' GROUP BY 1, 2 ORDER BY 1, 2;
SELECT name, cron, last_job_id IS NOT NULL AS fired, last_error FROM bgexec.schedule ORDER BY name;
SELECT rolname, rolsuper FROM pg_roles WHERE rolname IN ('regress_alice', 'regress_worker') ORDER BY 1;
-- leave nothing to the suites after this one
DELETE FROM bgexec.job WHERE queue LIKE 'tmp-%';
DELETE FROM bgexec.schedule;
DELETE FROM bgexec.queue WHERE name = 'tmp-cap';
DELETE FROM bgexec.worker WHERE id IN ('w-tmp', 'w-old');

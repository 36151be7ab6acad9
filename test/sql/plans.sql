-- plans: the functions keep their plans for the session, so a plan made on a
-- small table must not read the table whole: none of them may scan bgexec.job
-- or bgexec.job_event sequentially, even here where the tables are small.
\set SHOW_CONTEXT never
SELECT pg_stat_force_next_flush();
CREATE TEMP TABLE scans AS
SELECT relname, seq_scan FROM pg_stat_user_tables WHERE relid IN ('bgexec.job'::regclass, 'bgexec.job_event'::regclass);
CREATE FUNCTION pass(i int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	ids bigint[];
	ls bigint[];
BEGIN
	PERFORM bgexec.submit('noop', queue => 'pl', idempotency_key => 'pl-' || i);
	PERFORM bgexec.submit_many(jsonb_build_array(
		jsonb_build_object('kind', 'noop', 'queue', 'pl'),
		jsonb_build_object('kind', 'noop', 'queue', 'pl', 'idempotency_key', 'plm-' || i),
		jsonb_build_object('kind', 'noop', 'queue', 'pl', 'max_attempts', 2)));
	SELECT array_agg(job_id ORDER BY job_id), array_agg(lease ORDER BY job_id) INTO ids, ls
	  FROM bgexec.claim('wp', '{pl}', 4);
	PERFORM bgexec.heartbeat('wp', ls);
	PERFORM bgexec.append_events(ids[1], ls[1], '[{"kind": "log", "data": {}}]');
	PERFORM bgexec.append_event(ids[2], ls[2], 'progress');
	PERFORM bgexec.finish(ids[1], ls[1], 'completed', '{}');
	PERFORM bgexec.finish_many(jsonb_build_array(
		jsonb_build_object('job_id', ids[2], 'lease', ls[2], 'outcome', 'completed', 'body', '{}'),
		jsonb_build_object('job_id', ids[3], 'lease', ls[3], 'outcome', 'suspended', 'body', '{}'),
		jsonb_build_object('job_id', ids[4], 'lease', ls[4], 'outcome', 'failed', 'body', '{}')));
	PERFORM bgexec.resume(ids[3]);
	PERFORM bgexec.stop(ids[3]);
	PERFORM bgexec.retry(ids[4]);
	PERFORM bgexec.reconcile();
END
$$;
-- more passes than PL/pgSQL's five custom plans, so the cached generic ones run
SELECT count(pass(i)) FROM generate_series(1, 8) i;
SELECT pg_stat_force_next_flush();
SELECT s.relname, t.seq_scan - s.seq_scan AS seq_scans
  FROM scans s JOIN pg_stat_user_tables t ON t.relid = ('bgexec.' || s.relname)::regclass
 ORDER BY 1;
DROP FUNCTION pass(int);
-- and each of them plans without JIT: with sequential scans disabled, a
-- statement that has no other path (queue_count has no index) carries the
-- penalty in its cost and would be compiled, tens of milliseconds a call
SELECT p.oid::regprocedure AS missing_setting
  FROM pg_proc p
 WHERE p.pronamespace = 'bgexec'::regnamespace
   AND p.proname IN ('claim', 'heartbeat', 'append_events', '_finish_one', 'finish_many',
                     '_submit_one', 'submit_many', 'stop', 'resume', 'retry', 'reconcile',
                     'unclaim', '_fire_schedules', '_retention', 'purge')
   AND NOT coalesce(p.proconfig @> ARRAY['enable_seqscan=off', 'jit=off'], false)
 ORDER BY 1;
-- No SECURITY DEFINER function is SQL: SECURITY DEFINER and SET keep a SQL
-- function from being inlined, and PostgreSQL 15 then parses and plans its
-- body again on every call (PL/pgSQL keeps the plan for the session)
SELECT p.oid::regprocedure AS sql_security_definer
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace = 'bgexec'::regnamespace AND p.prosecdef AND l.lanname = 'sql'
 ORDER BY 1;
-- reconcile takes a fleet's expired leases back set-based, in batches:
-- no PL/pgSQL function runs once per job.  Row by row (_reconcile_one,
-- _terminal, _requeue, _event, _running_ended a job) 5 000 expired
-- leases held the watchdog's locks and transaction for 1.9 s
-- (bench/README.md).  300 jobs, a third of them with attempts left.
SET track_functions = 'pl';
BEGIN;
SELECT count(*) AS submitted FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object(
       'kind', 'noop', 'queue', 'plr', 'max_attempts', 1 + (i % 3 = 0)::int))
  FROM generate_series(1, 300) i));
SELECT count(*) AS claimed FROM bgexec.claim('wr', '{plr}', 300);
UPDATE bgexec.job SET lease_expires_at = now() - interval '1 second' WHERE queue = 'plr';
CREATE TEMP TABLE calls_before AS
SELECT funcid, calls FROM pg_stat_xact_user_functions WHERE schemaname = 'bgexec';
SELECT bgexec.reconcile() AS reconciled;
SELECT f.funcname, f.calls - coalesce(b.calls, 0) AS calls
  FROM pg_stat_xact_user_functions f LEFT JOIN calls_before b USING (funcid)
 WHERE f.schemaname = 'bgexec' AND f.calls - coalesce(b.calls, 0) >= 30
 ORDER BY 1;
SELECT status, count(*) AS jobs,
       bool_and((SELECT string_agg(e.kind, ',' ORDER BY e.seq) FROM bgexec.job_event e
                  WHERE e.job_id = j.id) = CASE status WHEN 'queued' THEN 'started,worker_lost,retry_scheduled'
                                                       ELSE 'started,worker_lost,failed' END) AS events
  FROM bgexec.job j WHERE queue = 'plr' GROUP BY status ORDER BY status;
ROLLBACK;
RESET track_functions;
-- No parallel plan reads bgexec.job (its reloption parallel_workers = 0): a
-- listing's LIMIT under Gather Merge waited for every worker, and a worker
-- whose share held no match walked the table to its start (a tenant's
-- listing of 51 rows: 3 s); queue_stats started workers on every dashboard
-- refresh.  Here parallel plans cost nothing, and job_event (no reloption)
-- shows the settings would choose one.
CREATE FUNCTION parallel_scans(q text, rel text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	r text;
	n bigint := 0;
BEGIN
	FOR r IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
		IF r ~ ('Parallel .* on ' || rel || '( |$)') THEN
			n := n + 1;
		END IF;
	END LOOP;
	RETURN n;
END
$$;
BEGIN;
SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
SET LOCAL min_parallel_table_scan_size = 0;
SET LOCAL min_parallel_index_scan_size = 0;
SET LOCAL max_parallel_workers_per_gather = 2;
SELECT parallel_scans('SELECT id FROM bgexec.job WHERE status = ''queued'' ORDER BY id DESC LIMIT 51', 'job') AS listing,
       parallel_scans('SELECT * FROM bgexec.job WHERE kind = ''x'' ORDER BY id DESC LIMIT 51', 'job') AS by_kind,
       parallel_scans('SELECT * FROM bgexec.queue_stats', 'job') AS queue_stats,
       parallel_scans('SELECT count(*) FROM bgexec.job_event', 'job_event') > 0 AS events_parallel;
ROLLBACK;
DROP FUNCTION parallel_scans(text, text);

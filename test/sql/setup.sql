-- setup: the extension, two client roles, a worker role.
\set SHOW_CONTEXT never
CREATE EXTENSION bgexec;
SELECT extname, extversion, extrelocatable FROM pg_extension WHERE extname = 'bgexec';
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'regress_alice') THEN
		CREATE ROLE regress_alice LOGIN IN ROLE bgexec_client;
		CREATE ROLE regress_bob LOGIN IN ROLE bgexec_client;
		CREATE ROLE regress_worker LOGIN IN ROLE bgexec_worker;
	END IF;
END $$;
-- helper for the tests: make every lease of a job expire now (as if the worker vanished)
CREATE FUNCTION expire_lease(bigint) RETURNS void LANGUAGE sql
	AS $$ UPDATE bgexec.job SET lease_expires_at = now() - interval '1 second' WHERE id = $1 $$;
-- helper: an hour's lease for every running job (and a deadline, where it
-- has one, no sooner), called first by each test that prints what
-- reconcile() acted on.  The jobs earlier tests leave running hold claim()'s
-- default 30-second lease, so a suite that took longer than that to get
-- there would otherwise count them.
CREATE FUNCTION extend_leftover_leases() RETURNS boolean LANGUAGE sql
	AS $$ UPDATE bgexec.job SET lease_expires_at = greatest(lease_expires_at, now() + interval '1 hour'),
	                            deadline = CASE WHEN deadline < now() + interval '1 hour'
	                                        THEN now() + interval '1 hour' ELSE deadline END
	       WHERE status = 'running';
	      SELECT true $$;
-- helper: the event kinds of a job, in seq order, and whether seqs are gapless
CREATE FUNCTION event_kinds(bigint) RETURNS text LANGUAGE sql
	AS $$ SELECT string_agg(kind, ',' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $1 $$;
CREATE FUNCTION gapless(bigint) RETURNS boolean LANGUAGE sql
	AS $$ SELECT coalesce(bool_and(seq = rn), true) AND
	             (SELECT last_seq FROM bgexec.job WHERE id = $1) = count(*)
	        FROM (SELECT seq, row_number() OVER (ORDER BY seq) AS rn
	                FROM bgexec.job_event WHERE job_id = $1) s $$;
CREATE FUNCTION terminal_events(bigint) RETURNS bigint LANGUAGE sql
	AS $$ SELECT count(*) FROM bgexec.job_event WHERE job_id = $1
	       AND kind IN ('completed', 'failed', 'cancelled', 'timed_out') $$;
GRANT EXECUTE ON FUNCTION expire_lease(bigint), event_kinds(bigint), gapless(bigint),
	terminal_events(bigint) TO PUBLIC;
-- helper: runs a statement that must fail; shows its SQLSTATE and message
CREATE FUNCTION try(stmt text) RETURNS TABLE (sqlstate text, message text) LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE stmt;
	RETURN QUERY SELECT 'none'::text, 'no error'::text;
EXCEPTION WHEN OTHERS THEN
	RETURN QUERY SELECT SQLSTATE::text, SQLERRM;
END $$;
GRANT EXECUTE ON FUNCTION try(text) TO PUBLIC;
-- helper: where queue_stats disagrees with a count of the jobs themselves
-- (its terminal counts come from bgexec.queue_count); no rows = exact
CREATE FUNCTION stats_mismatch() RETURNS TABLE (queue text, what text, shown text, actual text)
	LANGUAGE sql AS $$
	WITH actual AS (
		SELECT j.queue, j.status::text AS what, count(*)::text AS n FROM bgexec.job j GROUP BY 1, 2
		UNION ALL
		SELECT j.queue, 'oldest_queued_age', (now() - min(j.run_after))::text FROM bgexec.job j
		 WHERE j.status = 'queued' AND j.run_after <= now() GROUP BY 1
		UNION ALL
		SELECT name, 'listed', 'true' FROM (SELECT name FROM bgexec.queue UNION SELECT queue FROM bgexec.job) n),
	shown AS (
		SELECT s.queue, x.what, x.n FROM bgexec.queue_stats s,
		LATERAL (VALUES ('queued', s.queued::text), ('running', s.running::text),
		                ('suspended', s.suspended::text), ('completed', s.completed::text),
		                ('failed', s.failed::text), ('cancelled', s.cancelled::text),
		                ('timed_out', s.timed_out::text),
		                ('oldest_queued_age', s.oldest_queued_age::text),
		                ('listed', 'true')) x(what, n)
		 WHERE x.n IS NOT NULL AND x.n <> '0')
	SELECT coalesce(a.queue, s.queue), coalesce(a.what, s.what), s.n, a.n
	  FROM actual a FULL JOIN shown s ON s.queue = a.queue AND s.what = a.what
	 WHERE a.n IS DISTINCT FROM s.n
	 ORDER BY 1, 2 $$;
-- the worker id most suites claim as (heartbeat asks an unregistered one to register)
SELECT bgexec.register_worker('w', '{}', 1);

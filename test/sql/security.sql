-- security: clients see, stop, resume and dedupe only their own jobs; no table is writable.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
SET ROLE regress_alice;
SELECT bgexec.submit('noop', queue => 'sec', idempotency_key => 'shared-key') AS a \gset
SELECT current_user, count(*) FROM bgexec.job WHERE queue = 'sec' GROUP BY 1;
RESET ROLE;
SET ROLE regress_bob;
-- bob cannot see alice's job, by table or by function (P0002: no such job, for him)
SELECT count(*) FROM bgexec.job WHERE id = :a;
SELECT count(*) FROM bgexec.job_event WHERE job_id = :a;
-- nor the events of one that has some (alice's, claimed by a worker)
RESET ROLE;
SET ROLE regress_alice;
SELECT bgexec.submit('noop', queue => 'sec-ev') AS ae \gset
RESET ROLE;
SELECT count(*) AS claimed FROM bgexec.claim('wsec', '{sec-ev}', 1);
SET ROLE regress_alice;
SELECT count(*) AS alice_sees FROM bgexec.job_event WHERE job_id = :ae;
RESET ROLE;
SET ROLE regress_bob;
SELECT count(*) AS bob_sees FROM bgexec.job_event WHERE job_id = :ae;
\set VERBOSITY sqlstate
SELECT * FROM bgexec.events(:a);
-- bob cannot stop, resume or retry it (it "does not exist" for him)
SELECT bgexec.stop(:a);
SELECT bgexec.resume(:a);
SELECT bgexec.retry(:a);
\set VERBOSITY default
-- bob's same idempotency key is his own job, not alice's
SELECT bgexec.submit('noop', queue => 'sec', idempotency_key => 'shared-key') <> :a AS bob_own;
-- no table is writable by clients directly
INSERT INTO bgexec.job (kind, owner) VALUES ('noop', 'regress_bob');
UPDATE bgexec.job SET status = 'completed' WHERE id = :a;
DELETE FROM bgexec.job_event;
INSERT INTO bgexec.queue (name) VALUES ('mine');
-- clients cannot call worker functions
SELECT * FROM bgexec.claim('bob', '{sec}', 1);
SELECT bgexec.finish(:a, 1, 'completed', '{}');
SELECT bgexec.reconcile();
-- nor administer queues
SELECT bgexec.configure_queue('sec', paused => true);
RESET ROLE;
-- the worker role claims and finishes, but is not a client
SET ROLE regress_worker;
SELECT owner FROM bgexec.claim('worker-1', '{sec}', 1) ORDER BY job_id LIMIT 1;
SELECT bgexec.submit('noop');
SELECT count(*) FROM bgexec.job;
RESET ROLE;
-- alice still sees and stops her own job
SET ROLE regress_alice;
SELECT status FROM bgexec.job WHERE id = :a;
SELECT bgexec.stop(:a);
SELECT seq, kind FROM bgexec.events(:a) ORDER BY seq;
RESET ROLE;
-- a client acting as the group role bgexec_client (SET ROLE) cannot submit:
-- the job would be owned by the group, so readable by every client (42501,
-- nothing written)
SET ROLE regress_alice;
SET ROLE bgexec_client;
SELECT bgexec.submit('noop', queue => 'sec-group');
SELECT bgexec.submit_many('[{"kind": "noop", "queue": "sec-group"}]');
SELECT bgexec.submit_many('[{"kind": "noop", "queue": "sec-group", "idempotency_key": "g"}]');
RESET ROLE;
SELECT count(*) AS group_jobs FROM bgexec.job WHERE owner IN ('bgexec_client', 'bgexec_worker');
-- a client's code that a superuser's maintenance runs (an index expression,
-- run by ANALYZE as the table's owner, the outer user still the superuser)
-- is refused: it acted as the superuser (42501, nothing written)
CREATE SCHEMA regress_sro AUTHORIZATION regress_alice;
SET ROLE regress_alice;
CREATE TABLE regress_sro.seen (what text);
CREATE FUNCTION regress_sro.helper() RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
	INSERT INTO regress_sro.seen VALUES ('caller ' || bgexec._caller());
	INSERT INTO regress_sro.seen VALUES ('job ' || bgexec.submit('noop', queue => 'sro'));
EXCEPTION WHEN OTHERS THEN
	INSERT INTO regress_sro.seen VALUES (SQLSTATE || ' ' || SQLERRM);
END $f$;
CREATE FUNCTION regress_sro.grab(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN PERFORM regress_sro.helper(); RETURN $1; END $f$;
CREATE TABLE regress_sro.t (x int);
INSERT INTO regress_sro.t VALUES (1);
CREATE INDEX ON regress_sro.t (regress_sro.grab(x));
TRUNCATE regress_sro.seen;
RESET ROLE;
ANALYZE regress_sro.t;
SELECT what FROM regress_sro.seen;
SELECT count(*) AS sro_jobs FROM bgexec.job WHERE queue = 'sro';
SET client_min_messages = warning;
DROP SCHEMA regress_sro CASCADE;
RESET client_min_messages;
-- another role's SECURITY DEFINER function acts in bgexec as that role, not
-- as whoever calls it: bob's function, called by alice or by a superuser,
-- submits jobs bob owns (their sql steps run as bob), reads and stops only
-- bob's jobs.  bgexec saw the outer user there, so bob's code acted as the
-- caller: owned her jobs, read her events, stopped, retried, purged them
CREATE SCHEMA regress_sdf AUTHORIZATION regress_bob;
SET ROLE regress_bob;
CREATE FUNCTION regress_sdf.act(target bigint) RETURNS text
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $f$
DECLARE
	v bigint := bgexec.submit('noop', queue => 'sdf');
	r text := 'caller ' || bgexec._caller() || ', job owner '
	          || (SELECT owner FROM bgexec.job WHERE id = v);
BEGIN
	BEGIN
		PERFORM bgexec.events(target);
		r := r || ', events read';
	EXCEPTION WHEN OTHERS THEN r := r || ', events ' || SQLSTATE;
	END;
	BEGIN
		PERFORM bgexec.stop(target);
		r := r || ', stopped';
	EXCEPTION WHEN OTHERS THEN r := r || ', stop ' || SQLSTATE;
	END;
	RETURN r;
END $f$;
GRANT USAGE ON SCHEMA regress_sdf TO PUBLIC;
GRANT EXECUTE ON FUNCTION regress_sdf.act(bigint) TO PUBLIC;
-- a SECURITY INVOKER function (or a SET clause alone) changes nothing
CREATE FUNCTION regress_sdf.invoker() RETURNS name
	LANGUAGE sql SET search_path = pg_catalog AS $f$ SELECT bgexec._caller() $f$;
GRANT EXECUTE ON FUNCTION regress_sdf.invoker() TO PUBLIC;
-- nor a parallel plan: a parallel worker has none of the leader's record of
-- the SECURITY DEFINER calls it is in, so _caller() (PARALLEL SAFE then)
-- named the caller there
CREATE TABLE regress_sdf.one AS SELECT 1 AS x;
CREATE FUNCTION regress_sdf.parallel() RETURNS SETOF name
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog SET force_parallel_mode = on AS $f$
BEGIN
	RETURN QUERY SELECT bgexec._caller() FROM regress_sdf.one;
END $f$;
GRANT EXECUTE ON FUNCTION regress_sdf.parallel() TO PUBLIC;
RESET ROLE;
SET ROLE regress_alice;
SELECT bgexec.submit('noop', queue => 'sdf-alice') AS alice_job \gset
SELECT regress_sdf.act(:alice_job), regress_sdf.invoker();
SELECT * FROM regress_sdf.parallel();
RESET ROLE;
SELECT regress_sdf.act(:alice_job), regress_sdf.invoker();
SELECT * FROM regress_sdf.parallel();
SELECT owner, count(*) FROM bgexec.job WHERE queue LIKE 'sdf%' GROUP BY 1 ORDER BY 1;
SELECT status FROM bgexec.job WHERE id = :alice_job;
SET client_min_messages = warning;
DROP SCHEMA regress_sdf CASCADE;
RESET client_min_messages;
-- a role outside bgexec_client cannot use the API at all
CREATE ROLE regress_outsider;
SET ROLE regress_outsider;
SELECT bgexec.submit('noop');
RESET ROLE;
DROP ROLE regress_outsider;
-- every SECURITY DEFINER function pins search_path, with pg_temp last (regress pgtemp)
SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'bgexec' AND p.prosecdef
   AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, bgexec, pg_temp'], false)
 ORDER BY 1;
-- and so does every other SQL or PL/pgSQL function, but those that must be
-- inlined into their callers (a SET prevents it; their bodies name no type
-- but pg_catalog's, qualified)
SELECT p.proname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace = 'bgexec'::regnamespace AND l.lanname <> 'c'
   AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, bgexec, pg_temp'], false)
 ORDER BY 1;
-- no bgexec function is executable by PUBLIC but _step_completed, whose
-- right is the sql step's mark (step_session)
SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'bgexec' AND has_function_privilege('public', p.oid, 'EXECUTE')
 ORDER BY 1;
-- _act_as, what a worker's sql step runs the owner's statement under: the
-- role is set for the rest of the transaction and cannot be changed again,
-- by any of the ways a statement has (the worker's login may become every
-- tenant, so a plain SET LOCAL ROLE let alice's step act as bob or as the
-- worker itself)
\set VERBOSITY terse
SELECT bgexec._act_as('regress_alice');
-- a null role is an error, not a statement left to run as the caller (the
-- function was STRICT, so it returned null and set nothing)
BEGIN;
SELECT bgexec._act_as(NULL);
ROLLBACK;
BEGIN;
SELECT bgexec._act_as('regress_alice');
SELECT current_user, bgexec._caller();
SET ROLE regress_bob;
ROLLBACK;
BEGIN;
SELECT bgexec._act_as('regress_alice');
SELECT set_config('role', 'regress_bob', true);
ROLLBACK;
BEGIN;
SELECT bgexec._act_as('regress_alice');
RESET ROLE;
ROLLBACK;
BEGIN;
SELECT bgexec._act_as('regress_alice');
DO $$BEGIN EXECUTE 'RESET ROLE'; END$$;
ROLLBACK;
BEGIN;
SELECT bgexec._act_as('regress_alice');
SET SESSION AUTHORIZATION regress_bob;
ROLLBACK;
-- after an exception block (a subtransaction) the role is still fixed
BEGIN;
SELECT bgexec._act_as('regress_alice');
DO $$BEGIN BEGIN PERFORM 1 / 0; EXCEPTION WHEN division_by_zero THEN NULL; END;
          EXECUTE 'SET ROLE regress_bob'; END$$;
ROLLBACK;
-- a function's SET role clause
CREATE FUNCTION pg_temp.as_bob() RETURNS name LANGUAGE sql SET role = regress_bob AS 'SELECT current_user';
BEGIN;
SELECT bgexec._act_as('regress_alice');
SELECT pg_temp.as_bob();
ROLLBACK;
-- a committed transaction leaves the session as it was
BEGIN;
SELECT bgexec._act_as('regress_alice');
SELECT current_user;
COMMIT;
SELECT current_user = session_user AS back_to_session_user;
SET ROLE regress_bob;
SELECT current_user;
RESET ROLE;
-- and the role's own settings (ALTER ROLE ... SET), which PostgreSQL
-- applies only at login, for the transaction: this database's over all
-- databases', a superuser's too; never role, nor transaction_*; what the
-- session set itself wins: work_mem here, TimeZone at connect (pg_regress
-- sends PGTZ's)
ALTER ROLE regress_alice SET search_path = regress_nowhere, public;
SELECT format('ALTER ROLE regress_alice IN DATABASE %I SET search_path = regress_here, public',
              current_database()) \gexec
ALTER ROLE regress_alice SET TimeZone = 'Asia/Tokyo';
ALTER ROLE regress_alice SET lock_timeout = '7s';
ALTER ROLE regress_alice SET log_min_duration_statement = '12s';
ALTER ROLE regress_alice SET role = regress_bob;
ALTER ROLE regress_alice SET transaction_read_only = on;
ALTER ROLE regress_alice SET work_mem = '5MB';
-- one that takes effect only at login (PGC_SU_BACKEND): skipped, silently
-- (ALTER ROLE refuses it now; stored by hand here, as a catalog from
-- elsewhere may hold it)
UPDATE pg_db_role_setting SET setconfig = setconfig || '{log_disconnections=on}'
 WHERE setrole = 'regress_alice'::regrole AND setdatabase = 0;
SET work_mem = '3MB';
BEGIN;
SELECT bgexec._act_as('regress_alice');
SELECT current_user, current_setting('search_path') AS search_path, current_setting('TimeZone') AS tz,
       current_setting('lock_timeout') AS lt, current_setting('log_min_duration_statement') AS lmds,
       current_setting('transaction_read_only') AS ro,
       current_setting('work_mem') AS work_mem, current_setting('log_disconnections') AS ld;
COMMIT;
-- for the transaction only
SELECT current_setting('search_path') AS search_path, current_setting('lock_timeout') AS lt,
       current_setting('log_min_duration_statement') AS lmds;
RESET work_mem;
ALTER ROLE regress_alice RESET ALL;
SELECT format('ALTER ROLE regress_alice IN DATABASE %I RESET ALL', current_database()) \gexec
-- at the transaction's own level only: a savepoint rolled back would undo it
BEGIN;
SAVEPOINT s;
SELECT bgexec._act_as('regress_alice');
ROLLBACK;
\set VERBOSITY default
-- the session user must be allowed to become the role, as for SET ROLE,
-- and the error says which grant a worker's login role lacks
BEGIN;
SET LOCAL SESSION AUTHORIZATION regress_worker;
SELECT bgexec._act_as('regress_alice');
ROLLBACK;
-- retry of another role's job in a queue with caps is P0002 too, even under
-- REPEATABLE READ: the caps' isolation check (0A000) named the job's queue,
-- and came before the job's owner was checked
SELECT bgexec.configure_queue('sec-capped', max_queued => 10);
SET ROLE regress_alice;
SELECT bgexec.submit('noop', queue => 'sec-capped') AS capped \gset
RESET ROLE;
SET ROLE regress_bob;
\set VERBOSITY sqlstate
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT bgexec.retry(:capped);
ROLLBACK;
\set VERBOSITY default
RESET ROLE;
-- _secret_step (a sql step with a secret parameter): the worker's role
-- only; the server's log settings for the rest of the transaction alone
SET ROLE regress_worker;
BEGIN;
SELECT bgexec._secret_step();
SELECT current_setting('log_min_messages') AS min_messages,
       current_setting('log_parameter_max_length') AS param_length,
       current_setting('log_parameter_max_length_on_error') AS on_error;
ROLLBACK;
SELECT current_setting('log_min_messages') AS after_the_transaction;
RESET ROLE;
SET ROLE regress_alice;
\set VERBOSITY sqlstate
SELECT bgexec._secret_step();
\set VERBOSITY default
RESET ROLE;
-- The hardening README gives for tenants who must not stall each other:
-- bgexec's advisory lock keys are public, so any role that may take
-- advisory locks can hold one (a worker's claims, a capped queue's submits
-- wait for it).  Revoked from PUBLIC, a client cannot, and bgexec goes on:
-- every entry point takes its locks as a SECURITY DEFINER function.
-- (the sixteen functions README lists: every one that takes a lock)
SELECT count(*) AS lock_functions, string_agg(p.oid::regprocedure::text, ', ') AS advisory
  FROM pg_proc p
 WHERE p.proname ~ '^pg_(try_)?advisory_(xact_)?lock(_shared)?$' \gset
SELECT :lock_functions AS lock_functions;
REVOKE EXECUTE ON FUNCTION :advisory FROM PUBLIC;
SELECT (bgexec.configure_queue('sec-locks', max_queued => 10, max_running => 5)).name AS capped;
SET ROLE regress_alice;
SELECT * FROM try($$SELECT pg_advisory_lock(hashtext('bgexec.claim.worker'), hashtext('w-locks'))$$);
SELECT bgexec.submit('noop', queue => 'sec-locks') > 0 AS submitted;
SELECT count(*) AS submitted_many
  FROM bgexec.submit_many('[{"kind": "noop", "queue": "sec-locks"}, {"kind": "noop", "queue": "sec-locks"}]');
RESET ROLE;
SET ROLE regress_worker;
SELECT bgexec.register_worker('w-locks', ARRAY['sec-locks'], 4, '{"host": "h", "pid": 1}');
SELECT count(*) AS claimed FROM bgexec.claim('w-locks', ARRAY['sec-locks'], 2, '30 s', '{"host": "h", "pid": 1}');
SELECT bgexec.unclaim('w-locks', 0, ARRAY[]::bigint[], '{"host": "h", "pid": 1}') AS unclaimed;
SELECT count(*) FILTER (WHERE f.status = 'failed') AS failed
  FROM bgexec.claim('w-locks', ARRAY['sec-locks'], 3, '30 s', '{"host": "h", "pid": 1}') c,
       LATERAL (SELECT bgexec.finish(c.job_id, c.lease, 'failed', '{"message": "x"}') AS status) f;
SELECT count(*) AS heartbeats FROM bgexec.heartbeat('w-locks', ARRAY[]::bigint[], '30 s', '{"host": "h", "pid": 1}');
SELECT bgexec.reconcile() >= 0 AS reconciled;
RESET ROLE;
SET ROLE regress_alice;
SELECT count(*) FILTER (WHERE bgexec.retry(id)) AS retried
  FROM bgexec.job WHERE queue = 'sec-locks' AND status = 'failed';
RESET ROLE;
SELECT queue, queued, failed FROM bgexec.queue_stats WHERE queue = 'sec-locks';
GRANT EXECUTE ON FUNCTION :advisory TO PUBLIC;

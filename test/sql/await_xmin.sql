-- await_xmin: a wait in await_work or await_claim, called as a statement of
-- its own outside a transaction block (as the daemon calls them), holds back
-- no xmin horizon while it sleeps: rows deleted meanwhile can be vacuumed
-- away, where every waiting worker used to keep them (and every dead entry
-- of job_runnable_idx, which each claim then walked) until its wait ended.
-- A wait whose statement could still read with its snapshot afterwards holds
-- it as any statement does: inside BEGIN ... COMMIT, beside a table, called
-- from a user's function.  (extension/wake.c, wait_may_release_xmin.)
--
-- Each case: a second session (dblink) starts the wait; once it sleeps,
-- this session deletes 100 rows the wait's snapshot could see and vacuums
-- them; n_dead_tup is what VACUUM had to keep (0 when the wait held no
-- xmin back); a submit then wakes the wait.  Each wait returns one boolean,
-- jobs (await_claim's: woken and a job claimed).
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT format('host=%s port=%s dbname=%s user=%s',
              split_part(current_setting('unix_socket_directories'), ',', 1),
              current_setting('port'), current_database(), current_user) AS here \gset
SELECT dblink_connect('xw', :'here') AS waiter, dblink_connect('xc', :'here') AS other;
CREATE TABLE xm_rows (id int) WITH (autovacuum_enabled = off);
CREATE TABLE xm_one (id int);
INSERT INTO xm_one VALUES (1);
CREATE FUNCTION xm_wrap() RETURNS boolean LANGUAGE sql
	AS $$ SELECT jobs FROM bgexec.await_work('xw', ARRAY['xm'], 1, '60 s') $$;
-- xm_start(q): 100 rows the wait will see (committed by a third session); sends q on the second session;
-- once it sleeps in the wait, whether its xmin is held; deletes the rows
-- (their counts flushed to the statistics at this statement's end, before
-- the VACUUM that follows).
CREATE FUNCTION xm_start(q text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	v_held boolean;
BEGIN
	-- Committed before the wait begins: by a third session.
	PERFORM dblink_exec('xc', 'INSERT INTO xm_rows SELECT generate_series(1, 100)');
	PERFORM dblink_send_query('xw', q);
	FOR i IN 1..3000 LOOP
		PERFORM pg_stat_clear_snapshot();
		SELECT backend_xmin IS NOT NULL INTO v_held FROM pg_stat_activity
		 WHERE query = q AND wait_event_type = 'Extension' AND wait_event = 'Extension';
		IF FOUND THEN
			-- Held on every one of five looks 10 ms apart: between two
			-- sleeps of its loop a wait may hold a snapshot for a moment,
			-- and a loaded host once showed one such moment.
			FOR j IN 1..4 LOOP
				PERFORM pg_sleep(0.01);
				PERFORM pg_stat_clear_snapshot();
				SELECT v_held AND coalesce(bool_and(backend_xmin IS NOT NULL), true) INTO v_held
				  FROM pg_stat_activity WHERE query = q;
			END LOOP;
			DELETE FROM xm_rows;
			PERFORM pg_stat_force_next_flush();
			RETURN v_held;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RAISE EXCEPTION 'the wait did not start: %', q;
END $$;
-- xm_result(): what the woken wait returned.
CREATE FUNCTION xm_result() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	v_jobs boolean;
BEGIN
	SELECT r.jobs INTO v_jobs FROM dblink_get_result('xw') AS r(jobs boolean);
	PERFORM FROM dblink_get_result('xw') AS r(jobs boolean);  -- the end of it
	RETURN v_jobs;
END $$;

-- The daemon's idle wait: no xmin while it sleeps, so VACUUM removes all.
SELECT xm_start($$SELECT jobs FROM bgexec.await_work('xw', ARRAY['xm'], 1, '60 s')$$) AS xmin_held;
VACUUM xm_rows;
SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'xm_rows';
SELECT bgexec.submit('noop', queue => 'xm') > 0 AS submitted;
SELECT xm_result() AS jobs;

-- await_claim: the same, and the job that woke it is claimed.
SELECT xm_start($$SELECT woken AND job_id IS NOT NULL AS jobs FROM bgexec.await_claim('xw', ARRAY['xm'], 1, '60 s')$$) AS xmin_held;
VACUUM xm_rows;
SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'xm_rows';
SELECT bgexec.submit('noop', queue => 'xm') > 0 AS submitted;
SELECT xm_result() AS jobs;
SELECT status, lease_owner FROM bgexec.job WHERE queue = 'xm' ORDER BY id;

-- Inside a transaction block the wait's snapshot may be read again (a
-- cursor, REPEATABLE READ): the rows stay until it ends.
SELECT dblink_exec('xw', 'BEGIN');
SELECT xm_start($$SELECT jobs FROM bgexec.await_work('xw', ARRAY['xm'], 1, '60 s')$$) AS xmin_held;
VACUUM xm_rows;
SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'xm_rows';
SELECT bgexec.submit('noop', queue => 'xm') > 0 AS submitted;
SELECT xm_result() AS jobs;
SELECT dblink_exec('xw', 'COMMIT');

-- A statement that reads a table beside the wait.
SELECT xm_start($$SELECT a.jobs FROM xm_one o, bgexec.await_work('xw', ARRAY['xm'], 1, '60 s') a$$) AS xmin_held;
VACUUM xm_rows;
SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'xm_rows';
SELECT bgexec.submit('noop', queue => 'xm') > 0 AS submitted;
SELECT xm_result() AS jobs;

-- A wait inside a function of the user's, whose statement bgexec cannot see.
SELECT xm_start($$SELECT xm_wrap() AS jobs$$) AS xmin_held;
VACUUM xm_rows;
SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'xm_rows';
SELECT bgexec.submit('noop', queue => 'xm') > 0 AS submitted;
SELECT xm_result() AS jobs;

SELECT dblink_disconnect('xw'), dblink_disconnect('xc');
DELETE FROM bgexec.job WHERE queue = 'xm';
DROP FUNCTION xm_start(text), xm_result(), xm_wrap();
DROP TABLE xm_rows, xm_one;
DROP EXTENSION dblink;

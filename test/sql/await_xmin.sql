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
-- xmin back); a submit then wakes the wait.
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT dblink_connect('xw', format('host=%s port=%s dbname=%s user=%s',
         split_part(current_setting('unix_socket_directories'), ',', 1),
         current_setting('port'), current_database(), current_user)) AS connected;
CREATE TABLE xm_rows (id int) WITH (autovacuum_enabled = off);
CREATE TABLE xm_one (id int);
INSERT INTO xm_one VALUES (1);
CREATE FUNCTION xm_wrap() RETURNS boolean LANGUAGE sql
	AS $$ SELECT jobs FROM bgexec.await_work('xw', ARRAY['xm'], 1, '60 s') $$;
-- Sends q on the second session and returns once it sleeps in the wait:
-- whether its xmin is held then.
CREATE FUNCTION xm_start(q text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	v_held boolean;
BEGIN
	PERFORM dblink_send_query('xw', q);
	FOR i IN 1..3000 LOOP
		PERFORM pg_stat_clear_snapshot();
		SELECT backend_xmin IS NOT NULL INTO v_held FROM pg_stat_activity
		 WHERE query = q AND wait_event_type = 'Extension' AND wait_event = 'Extension';
		IF FOUND THEN
			RETURN v_held;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RAISE EXCEPTION 'the wait did not start: %', q;
END $$;

-- The daemon's idle wait: no xmin while it sleeps, so VACUUM removes all.
INSERT INTO xm_rows SELECT generate_series(1, 100);
SELECT xm_start($$SELECT jobs, stop FROM bgexec.await_work('xw', ARRAY['xm'], 1, '60 s')$$) AS xmin_held;
DELETE FROM xm_rows;
SELECT pg_stat_force_next_flush();
VACUUM xm_rows;
SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'xm_rows';
SELECT bgexec.submit('noop', queue => 'xm') > 0 AS submitted;
SELECT * FROM dblink_get_result('xw') AS r(jobs boolean, stop boolean);
SELECT * FROM dblink_get_result('xw') AS r(jobs boolean, stop boolean);

-- await_claim: the same, and the job that woke it is claimed.
INSERT INTO xm_rows SELECT generate_series(1, 100);
SELECT xm_start($$SELECT woken, job_id IS NOT NULL AS claimed FROM bgexec.await_claim('xw', ARRAY['xm'], 1, '60 s')$$) AS xmin_held;
DELETE FROM xm_rows;
SELECT pg_stat_force_next_flush();
VACUUM xm_rows;
SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'xm_rows';
SELECT bgexec.submit('noop', queue => 'xm') > 0 AS submitted;
SELECT * FROM dblink_get_result('xw') AS r(woken boolean, claimed boolean);
SELECT * FROM dblink_get_result('xw') AS r(woken boolean, claimed boolean);
SELECT status, lease_owner FROM bgexec.job WHERE queue = 'xm' ORDER BY id;

-- Inside a transaction block the wait's snapshot may be read again (a
-- cursor, REPEATABLE READ): the rows stay until it ends.
INSERT INTO xm_rows SELECT generate_series(1, 100);
SELECT dblink_exec('xw', 'BEGIN');
SELECT xm_start($$SELECT jobs, stop FROM bgexec.await_work('xw', ARRAY['xm'], 1, '60 s')$$) AS xmin_held;
DELETE FROM xm_rows;
SELECT pg_stat_force_next_flush();
VACUUM xm_rows;
SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'xm_rows';
SELECT bgexec.submit('noop', queue => 'xm') > 0 AS submitted;
SELECT * FROM dblink_get_result('xw') AS r(jobs boolean, stop boolean);
SELECT * FROM dblink_get_result('xw') AS r(jobs boolean, stop boolean);
SELECT dblink_exec('xw', 'COMMIT');
VACUUM xm_rows;

-- A statement that reads a table beside the wait.
INSERT INTO xm_rows SELECT generate_series(1, 100);
SELECT xm_start($$SELECT o.id, a.jobs FROM xm_one o, bgexec.await_work('xw', ARRAY['xm'], 1, '60 s') a$$) AS xmin_held;
DELETE FROM xm_rows;
SELECT pg_stat_force_next_flush();
VACUUM xm_rows;
SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'xm_rows';
SELECT bgexec.submit('noop', queue => 'xm') > 0 AS submitted;
SELECT * FROM dblink_get_result('xw') AS r(id int, jobs boolean);
SELECT * FROM dblink_get_result('xw') AS r(id int, jobs boolean);
VACUUM xm_rows;

-- A wait inside a function of the user's, whose statement bgexec cannot see.
INSERT INTO xm_rows SELECT generate_series(1, 100);
SELECT xm_start($$SELECT xm_wrap() AS jobs$$) AS xmin_held;
DELETE FROM xm_rows;
SELECT pg_stat_force_next_flush();
VACUUM xm_rows;
SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'xm_rows';
SELECT bgexec.submit('noop', queue => 'xm') > 0 AS submitted;
SELECT * FROM dblink_get_result('xw') AS r(jobs boolean);
SELECT * FROM dblink_get_result('xw') AS r(jobs boolean);

SELECT dblink_disconnect('xw');
DELETE FROM bgexec.job WHERE queue = 'xm';
DROP FUNCTION xm_start(text), xm_wrap();
DROP TABLE xm_rows, xm_one;
DROP EXTENSION dblink;

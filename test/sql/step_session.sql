-- step_session: a worker's sql step marks its transaction as the job's step
-- under its lease (_step_session); when reconcile takes the lease back it
-- ends the sessions so marked (_end_step_sessions), so the statement of a
-- worker that cannot act (stopped, frozen) does not run on beside the job's
-- next attempt.  The step's session here is a dblink connection.
\set SHOW_CONTEXT never
\set VERBOSITY terse
SELECT extend_leftover_leases() AS leftovers_extended;
CREATE EXTENSION IF NOT EXISTS dblink;
-- this cluster's socket, port and database
SELECT format('host=%s port=%s dbname=%s user=%s',
              split_part(current_setting('unix_socket_directories'), ',', 1),
              current_setting('port'), current_database(), current_user) AS here \gset
-- waits up to 10 s (or `tries` hundredths of a second) for a backend to
-- exit; whether it did
CREATE FUNCTION pg_temp.gone(p int, tries int DEFAULT 1000) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..tries LOOP
		-- read afresh: a transaction keeps its first read of the backends
		PERFORM pg_stat_clear_snapshot();
		IF NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = p) THEN RETURN true; END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN false;
END $$;
-- a running job of its own for the checks below
SELECT bgexec.submit('noop', queue => 'ss0') AS job0 \gset
SELECT lease AS lease0 FROM bgexec.claim('w0', '{ss0}', 1, '1 hour') \gset
-- the arguments, inside a transaction block, once per transaction
SELECT bgexec._step_session(:job0, :lease0);
BEGIN;
SELECT bgexec._step_session(NULL, 1);
ROLLBACK;
BEGIN;
SELECT bgexec._step_session(1, NULL);
ROLLBACK;
BEGIN;
SELECT bgexec._step_session(:job0, :lease0);
SELECT bgexec._step_session(:job0, :lease0);
ROLLBACK;
-- only under a current lease: another lease of the job, a job that does
-- not exist (55000); the refused call leaves no mark, so the transaction
-- can still mark itself under its lease
BEGIN;
SELECT * FROM try(format('SELECT bgexec._step_session(%s, %s)', :job0, :lease0 + 1000));
SELECT * FROM try(format('SELECT bgexec._step_session(-1, %s)', :lease0));
SELECT bgexec._step_session(:job0, :lease0) AS marked_after;
ROLLBACK;
-- never the caller's own session
BEGIN;
SELECT bgexec._step_session(:job0, :lease0);
SELECT bgexec._end_step_sessions(:job0, :lease0);
ROLLBACK;
-- a job claimed, its sql step started in a session of its own
SELECT bgexec.submit('workflow', '{"steps": [{"id": "q", "sql": "SELECT 1"}]}', queue => 'ss') AS job \gset
SELECT lease FROM bgexec.claim('w', '{ss}', 1) \gset
SELECT dblink_connect('step', :'here');
SELECT pid FROM dblink('step', 'SELECT pg_backend_pid()') AS t(pid int) \gset
SELECT dblink_exec('step', 'BEGIN');
SELECT marked FROM dblink('step', format('SELECT bgexec._step_session(%s, %s)', :job, :lease)) AS t(marked boolean);
-- another lease's or another job's: left alone; a live lease: left alone
SELECT bgexec._end_step_sessions(:job, :lease + 1) AS other_lease, bgexec._end_step_sessions(:job + 1, :lease) AS other_job;
SELECT bgexec.reconcile() AS live_lease;
SELECT one FROM dblink('step', 'SELECT 1') AS t(one int);
-- the lease taken back by a reconcile that rolls back, whole or to a
-- savepoint: it took nothing back, and the step's session goes on
SELECT expire_lease(:job);
BEGIN;
SELECT bgexec.reconcile() AS taken_back_then_rolled_back;
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT bgexec.reconcile() AS taken_back_in_a_savepoint;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT pg_temp.gone(:pid, 100) AS step_session_ended;
SELECT status, lease = :lease AS same_lease FROM bgexec.job WHERE id = :job;
SELECT one FROM dblink('step', 'SELECT 1') AS t(one int);
-- the lease taken back: the step's session ends, its transaction rolled back
SELECT bgexec.reconcile();
SELECT pg_temp.gone(:pid) AS step_session_ended;
SELECT status, error->>'reason' AS reason FROM bgexec.job WHERE id = :job;
SELECT dblink_disconnect('step');
-- a step that starts after its lease was taken back (its worker frozen
-- between its last heartbeat and the step) is refused: it ran and
-- committed beside the job's next attempt
SELECT dblink_connect('step', :'here');
SELECT dblink_exec('step', 'BEGIN');
SELECT * FROM try(format('SELECT * FROM dblink(%L, %L) AS t(marked boolean)', 'step',
                  format('SELECT bgexec._step_session(%s, %s)', :job, :lease)));
SELECT dblink_exec('step', 'ROLLBACK');
SELECT dblink_disconnect('step');
-- a transaction that ended, committed or rolled back, is no longer marked
SELECT dblink_connect('step', :'here');
SELECT pid FROM dblink('step', 'SELECT pg_backend_pid()') AS t(pid int) \gset
SELECT dblink_exec('step', 'BEGIN');
SELECT marked FROM dblink('step', format('SELECT bgexec._step_session(%s, %s)', :job0, :lease0)) AS t(marked boolean);
SELECT dblink_exec('step', 'COMMIT');
SELECT dblink_exec('step', 'BEGIN');
SELECT bgexec._end_step_sessions(:job0, :lease0) AS committed;
SELECT dblink_exec('step', 'BEGIN');
SELECT marked FROM dblink('step', format('SELECT bgexec._step_session(%s, %s)', :job0, :lease0)) AS t(marked boolean);
SELECT dblink_exec('step', 'ROLLBACK');
SELECT bgexec._end_step_sessions(:job0, :lease0) AS rolled_back;
SELECT one FROM dblink('step', 'SELECT 1') AS t(one int);
SELECT dblink_disconnect('step');
-- every way out of running under the lease ends the job's step sessions
-- at commit, as reconcile's take-back does: a statement that outlasted its
-- cancel (it turned the server's connection check off and caught the
-- cancel) ran on for ever after the worker closed its session and
-- finished the job.  finish() failed with an attempt left (requeued):
SELECT bgexec.submit('workflow', '{"steps": [{"id": "q", "sql": "SELECT 1"}]}', queue => 'ss2', max_attempts => 2) AS job \gset
SELECT lease FROM bgexec.claim('w2', '{ss2}', 1) \gset
SELECT dblink_connect('step', :'here');
SELECT pid FROM dblink('step', 'SELECT pg_backend_pid()') AS t(pid int) \gset
SELECT dblink_exec('step', 'BEGIN');
SELECT marked FROM dblink('step', format('SELECT bgexec._step_session(%s, %s)', :job, :lease)) AS t(marked boolean);
-- a finish that rolls back ends nothing
BEGIN;
SELECT bgexec.finish(:job, :lease, 'failed', '{"message": "m"}') AS rolled_back;
ROLLBACK;
SELECT pg_temp.gone(:pid, 100) AS step_session_ended;
SELECT one FROM dblink('step', 'SELECT 1') AS t(one int);
-- a refused finish (another lease) ends nothing
SELECT bgexec.finish(:job, :lease + 1, 'failed', '{"message": "m"}') AS other_lease;
SELECT pg_temp.gone(:pid, 100) AS step_session_ended;
SELECT bgexec.finish(:job, :lease, 'failed', '{"message": "m"}') AS failed_with_retry;
SELECT pg_temp.gone(:pid) AS step_session_ended;
SELECT dblink_disconnect('step');
-- finish_many: the completions of a batch, in one call
SELECT bgexec.submit('noop', queue => 'ss3') AS joba \gset
SELECT bgexec.submit('noop', queue => 'ss3') AS jobb \gset
SELECT max(lease) FILTER (WHERE job_id = :joba) AS leasea, max(lease) FILTER (WHERE job_id = :jobb) AS leaseb
  FROM bgexec.claim('w3', '{ss3}', 2) \gset
SELECT dblink_connect('step', :'here');
SELECT pid FROM dblink('step', 'SELECT pg_backend_pid()') AS t(pid int) \gset
SELECT dblink_exec('step', 'BEGIN');
SELECT marked FROM dblink('step', format('SELECT bgexec._step_session(%s, %s)', :jobb, :leaseb)) AS t(marked boolean);
-- and the first job's, in another session: every position of the arrays counts
SELECT dblink_connect('step2', :'here');
SELECT pid AS pida FROM dblink('step2', 'SELECT pg_backend_pid()') AS t(pid int) \gset
SELECT dblink_exec('step2', 'BEGIN');
SELECT marked FROM dblink('step2', format('SELECT bgexec._step_session(%s, %s)', :joba, :leasea)) AS t(marked boolean);
BEGIN;
SELECT bgexec._end_step_sessions(ARRAY[:joba, :jobb]::bigint[], ARRAY[:leasea, :leaseb]::bigint[]) AS marked_of_two,
       bgexec._end_step_sessions(ARRAY[:jobb]::bigint[], ARRAY[:leasea]::bigint[]) AS other_lease,
       bgexec._end_step_sessions('{}'::bigint[], '{}'::bigint[]) AS none;
SELECT * FROM try('SELECT bgexec._end_step_sessions(''{1,2}''::bigint[], ''{1}''::bigint[])');
SELECT * FROM try('SELECT bgexec._end_step_sessions(''{1,NULL}''::bigint[], ''{1,2}''::bigint[])');
ROLLBACK;
SELECT pg_temp.gone(:pid, 100) AS step_session_ended;
SELECT job_id = :joba AS a, status FROM bgexec.finish_many(jsonb_build_array(
  jsonb_build_object('job_id', :joba, 'lease', :leasea, 'outcome', 'completed'),
  jsonb_build_object('job_id', :jobb, 'lease', :leaseb, 'outcome', 'completed')));
SELECT pg_temp.gone(:pid) AS step_session_ended, pg_temp.gone(:pida) AS first_step_session_ended;
SELECT dblink_disconnect('step'), dblink_disconnect('step2');
-- finish_many: a cancelled item (a stop), as finish()
SELECT bgexec.submit('noop', queue => 'ss4') AS job \gset
SELECT lease FROM bgexec.claim('w4', '{ss4}', 1) \gset
SELECT bgexec.stop(:job);
SELECT dblink_connect('step', :'here');
SELECT pid FROM dblink('step', 'SELECT pg_backend_pid()') AS t(pid int) \gset
SELECT dblink_exec('step', 'BEGIN');
SELECT marked FROM dblink('step', format('SELECT bgexec._step_session(%s, %s)', :job, :lease)) AS t(marked boolean);
SELECT status FROM bgexec.finish_many(jsonb_build_array(
  jsonb_build_object('job_id', :job, 'lease', :lease, 'outcome', 'cancelled', 'body', '{"reason": "stopped"}')));
SELECT pg_temp.gone(:pid) AS step_session_ended;
SELECT dblink_disconnect('step');
-- unclaim: a job whose claim reply the worker never received goes back to
-- the queue, and a step session under its lease ends at commit
SELECT bgexec.register_worker('ss-uw', '{ss5}', 1);
SELECT bgexec.submit('noop', queue => 'ss5') AS job \gset
SELECT lease FROM bgexec.claim('ss-uw', '{ss5}', 1) \gset
SELECT dblink_connect('step', :'here');
SELECT pid FROM dblink('step', 'SELECT pg_backend_pid()') AS t(pid int) \gset
SELECT dblink_exec('step', 'BEGIN');
SELECT marked FROM dblink('step', format('SELECT bgexec._step_session(%s, %s)', :job, :lease)) AS t(marked boolean);
SELECT bgexec.unclaim('ss-uw', 0, '{}') AS unclaimed;
SELECT pg_temp.gone(:pid) AS step_session_ended;
SELECT status FROM bgexec.job WHERE id = :job;
SELECT dblink_disconnect('step');
-- only the worker role may mark a session; only the extension's functions end them
SELECT has_function_privilege('bgexec_worker', 'bgexec._step_session(bigint, bigint)', 'EXECUTE') AS worker_marks,
       has_function_privilege('bgexec_worker', 'bgexec._end_step_sessions(bigint, bigint)', 'EXECUTE') AS worker_ends,
       has_function_privilege('bgexec_worker', 'bgexec._end_step_sessions(bigint[], bigint[])', 'EXECUTE') AS worker_ends_many,
       has_function_privilege('bgexec_client', 'bgexec._step_session(bigint, bigint)', 'EXECUTE') AS client_marks;
-- _step_completed: the step's step_completed, written in the step's own
-- transaction under the lease the transaction was marked with, once; its
-- seq.  Refused (55000) in a transaction not so marked, the second time,
-- and when the lease is no longer current; 22023 for anything but one
-- step_completed event.
SELECT bgexec.submit('noop', queue => 'ss6') AS job \gset
SELECT lease FROM bgexec.claim('w6', '{ss6}', 1, '1 hour') \gset
SELECT * FROM try($$SELECT bgexec._step_completed('[{"kind": "step_completed", "data": {"step": "q", "output": 1}}]')$$);
BEGIN;
SELECT bgexec._step_session(:job, :lease);
SELECT * FROM try($$SELECT bgexec._step_completed('[{"kind": "log", "data": {"step": "q"}}]')$$);
SELECT * FROM try($$SELECT bgexec._step_completed('[]')$$);
SELECT * FROM try($$SELECT bgexec._step_completed('[{"kind": "step_completed", "data": {"step": "q", "output": 1}}, {"kind": "log", "data": {"step": "q"}}]')$$);
SELECT * FROM try($$SELECT bgexec._step_completed(NULL)$$);
SELECT bgexec._step_completed('[{"kind": "step_completed", "data": {"step": "q", "output": [{"x": 1}]}}]') AS seq;
SELECT * FROM try($$SELECT bgexec._step_completed('[{"kind": "step_completed", "data": {"step": "r", "output": 2}}]')$$);
COMMIT;
SELECT seq, kind, data - 'lease' AS data FROM bgexec.job_event WHERE job_id = :job ORDER BY seq;
-- rolled back with the step: nothing written
BEGIN;
SELECT bgexec._step_session(:job, :lease);
SELECT bgexec._step_completed('[{"kind": "step_completed", "data": {"step": "r", "output": 2}}]') AS seq;
ROLLBACK;
SELECT count(*) AS events FROM bgexec.job_event WHERE job_id = :job;
-- the job no longer under the lease when the step ends (changed by hand
-- here, from another session: reconcile would end this one): refused
BEGIN;
SELECT bgexec._step_session(:job, :lease);
SELECT dblink_exec(:'here', format('UPDATE bgexec.job SET lease = lease + 1000 WHERE id = %s', :job));
SELECT * FROM try($$SELECT bgexec._step_completed('[{"kind": "step_completed", "data": {"step": "r", "output": 2}}]')$$);
ROLLBACK;
SELECT count(*) AS step_completed FROM bgexec.job_event WHERE job_id = :job AND kind = 'step_completed';
-- any role may call it (the statement's role, the job's owner): the mark is the right
SELECT has_function_privilege('public', 'bgexec._step_completed(jsonb)', 'EXECUTE') AS anyone_records,
       has_function_privilege('bgexec_worker', 'bgexec._step_mark()', 'EXECUTE') AS worker_reads_mark;
DROP EXTENSION dblink;

-- wake: bgexec.await_work and the commit-time wakes of idle workers
-- (extension/wake.c).  One session plays the worker: a wake for a slot that
-- is not asleep is kept for its next call, so the session sees what a commit
-- of its own woke.  Two workers sharing the jobs: isolation wake-one.
\set SHOW_CONTEXT never
-- bad input: 22023 naming the field (and nothing registered)
SELECT * FROM try($$SELECT bgexec.await_work('', '{wq}', 1, '0')$$);
SELECT * FROM try($$SELECT bgexec.await_work(NULL, '{wq}', 1, '0')$$);
SELECT * FROM try($$SELECT bgexec.await_work(repeat('é', 201), '{wq}', 1, '0')$$);
SELECT * FROM try($$SELECT bgexec.await_work('ww', NULL, 1, '0')$$);
SELECT * FROM try($$SELECT bgexec.await_work('ww', '{{wq}}', 1, '0')$$);
SELECT * FROM try($$SELECT bgexec.await_work('ww', '{wq}', -1, '0')$$);
SELECT * FROM try($$SELECT bgexec.await_work('ww', '{wq}', NULL, '0')$$);
SELECT * FROM try($$SELECT bgexec.await_work('ww', '{wq}', 1, NULL)$$);
SELECT * FROM try($$SELECT bgexec.await_work('ww', '{wq}', 1, '-1 second')$$);
SELECT * FROM try($$SELECT bgexec.await_work('ww', '{wq}', 1, '61 minutes')$$);
SELECT * FROM try($$SELECT bgexec.await_work('ww', '{wq}', 1, '2147483647 months')$$);
SELECT * FROM try($$SELECT bgexec.await_work('ww', '{wq}', 1, '1 day -9223372036854775807 microseconds')$$);
-- (a day less 86 399.9 seconds is 0.1 s: within bounds, no overflow)
SELECT * FROM try($$SELECT bgexec.await_work('ww', '{wq}', 1, '1 day -86399.9 seconds')$$);
-- workers only: a client role may not wait for work
SET ROLE regress_alice;
SELECT * FROM try($$SELECT bgexec.await_work('ww', '{wq}', 1, '0')$$);
RESET ROLE;
SET ROLE regress_worker;
-- registers; nothing arrived, so the next call waits out its timeout
SELECT * FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT clock_timestamp() AS t0 \gset
SELECT * FROM bgexec.await_work('ww', '{wq}', 2, '100 ms');
SELECT clock_timestamp() - :'t0' >= interval '100 ms' AS waited;
RESET ROLE;
-- a committed submit to one of its queues picks it: the wait returns at once
SELECT bgexec.submit('noop', queue => 'wq') > 0 AS submitted;
SELECT clock_timestamp() AS t0 \gset
SELECT * FROM bgexec.await_work('ww', '{other,wq}', 2, '10 seconds');
SELECT clock_timestamp() - :'t0' < interval '5 seconds' AS at_once;
-- returned once, then gone
SELECT * FROM bgexec.await_work('ww', '{other,wq}', 2, '0');
-- the same for submit_many, retry and a queue unpaused
SELECT count(*) FROM bgexec.submit_many('[{"kind": "noop", "queue": "wq"}, {"kind": "noop", "queue": "wq"}]');
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT bgexec.submit('noop', queue => 'wq', max_attempts => 1) AS r \gset
SELECT lease AS rl FROM bgexec.claim('wz', '{wq}', 10) WHERE job_id = :r \gset
SELECT bgexec.finish(:r, :rl, 'failed', '{"message": "x"}');
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');  -- the submit's wake
SELECT bgexec.retry(:r);
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
-- and for a resume (a queue of its own: the claim takes what it finds)
SELECT bgexec.submit('noop', queue => 'wr') AS s \gset
SELECT lease AS sl FROM bgexec.claim('wz', '{wr}', 1) \gset
SELECT bgexec.finish(:s, :sl, 'suspended', '{}');
SELECT jobs FROM bgexec.await_work('ww', '{wr}', 2, '0');  -- nothing to claim
SELECT bgexec.resume(:s);
SELECT jobs FROM bgexec.await_work('ww', '{wr}', 2, '0');
DELETE FROM bgexec.job WHERE queue = 'wr';
SELECT (bgexec.configure_queue('wq', paused => true)).paused;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT (bgexec.configure_queue('wq', paused => false)).paused;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
-- only a change that can make queued jobs claimable wakes: a new cap, a
-- lower one, max_queued and the backoff do not (every call of an unpaused
-- queue woke every waiting worker); a cap raised or removed does
SELECT (bgexec.configure_queue('wq', max_running => 5)).max_running;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT (bgexec.configure_queue('wq', max_running => 3, max_queued => 100, retry_cap => '1 hour')).max_running;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT (bgexec.configure_queue('wq', max_running => 4)).max_running;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT (bgexec.configure_queue('wq', max_running_per_key => 1)).max_running_per_key;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT (bgexec.configure_queue('wq', max_running_per_key => -1)).max_running_per_key;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT (bgexec.configure_queue('wq', max_running => -1, max_queued => -1)).max_running;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
-- the rate limit likewise: a new one or a longer period wakes no one; a
-- shorter period, a limit raised or removed does
SELECT (bgexec.configure_queue('wq', rate_limit => 10, rate_period => '1 s')).rate_limit;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT (bgexec.configure_queue('wq', rate_period => '2 s')).rate_period;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT (bgexec.configure_queue('wq', rate_period => '500 ms')).rate_period;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT (bgexec.configure_queue('wq', rate_limit => 20)).rate_limit;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT (bgexec.configure_queue('wq', rate_limit => -1)).rate_limit;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT (bgexec.configure_queue('wq', rate_period => '1 s')).rate_period;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
-- nothing for: a rolled back submit, a subtransaction rolled back (a released
-- one counts), another queue, a job due later, a worker with no free slot
BEGIN;
SELECT bgexec.submit('noop', queue => 'wq') > 0 AS submitted;
ROLLBACK;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
BEGIN;
SAVEPOINT s;
SELECT bgexec.submit('noop', queue => 'wq') > 0 AS submitted;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
BEGIN;
SAVEPOINT s;
SELECT bgexec.submit('noop', queue => 'wq') > 0 AS submitted;
RELEASE SAVEPOINT s;
COMMIT;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
-- a released subtransaction's wake belongs to its parent: a later
-- subtransaction at the same depth rolled back does not take it along
BEGIN;
SAVEPOINT s;
SELECT bgexec.submit('noop', queue => 'wq') > 0 AS submitted;
RELEASE SAVEPOINT s;
SAVEPOINT t;
ROLLBACK TO SAVEPOINT t;
COMMIT;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
-- released subtransactions' wakes merge with their parent's (one request
-- per queue and level, not one per savepoint): a merged wake still fires,
-- and one released into a subtransaction that is then rolled back is gone
-- with it, whatever it merged with there
BEGIN;
SAVEPOINT a;
SELECT bgexec.submit('noop', queue => 'wq') > 0 AS submitted;
RELEASE SAVEPOINT a;
SAVEPOINT b;
SELECT bgexec.submit('noop', queue => 'wq') > 0 AS submitted;
SELECT bgexec.submit('noop', queue => 'elsewhere') > 0 AS submitted;
RELEASE SAVEPOINT b;
SAVEPOINT c;
ROLLBACK TO SAVEPOINT c;
COMMIT;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
BEGIN;
SELECT bgexec.submit('noop', queue => 'elsewhere') > 0 AS submitted;
SAVEPOINT a;
SELECT bgexec.submit('noop', queue => 'wq') > 0 AS submitted;
SAVEPOINT b;
SELECT bgexec.submit('noop', queue => 'wq') > 0 AS submitted;
RELEASE SAVEPOINT b;
ROLLBACK TO SAVEPOINT a;
COMMIT;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT bgexec.submit('noop', queue => 'elsewhere') > 0 AS submitted;
SELECT bgexec.submit('noop', queue => 'wq', run_after => now() + interval '1 hour') > 0 AS later;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 0, '0');
SELECT bgexec.submit('noop', queue => 'wq') > 0 AS submitted;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
-- a job due later wakes the worker when it is due (not at its poll)
SELECT bgexec.submit('noop', queue => 'wq', run_after => now() + interval '300 ms') AS d \gset
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '10 seconds');
SELECT clock_timestamp() >= run_after AS due, clock_timestamp() - run_after < interval '5 seconds' AS on_time
  FROM bgexec.job WHERE id = :d;
-- and one of a submit_many that also submits a job due now (a mutation
-- test: the due-later wake of each queue's later times was not checked)
SELECT max(id) AS dm FROM bgexec.submit_many(jsonb_build_array(
  jsonb_build_object('kind', 'noop', 'queue', 'wq'),
  jsonb_build_object('kind', 'noop', 'queue', 'wq', 'run_after', now() + interval '300 ms'))) AS s(id) \gset
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');  -- the job due now
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '10 seconds');
SELECT clock_timestamp() >= run_after AS due, clock_timestamp() - run_after < interval '5 seconds' AS on_time
  FROM bgexec.job WHERE id = :dm;
-- so does a retry's backoff
SELECT (bgexec.configure_queue('wq', retry_base => '200 ms', retry_cap => '200 ms')).retry_cap;
SELECT bgexec.submit('noop', queue => 'wq', max_attempts => 2) AS f \gset
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');  -- the submit's wake
SELECT lease AS fl FROM bgexec.claim('wz', '{wq}', 10) WHERE job_id = :f \gset
SELECT bgexec.finish(:f, :fl, 'failed', '{"message": "again"}');
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '10 seconds');
SELECT clock_timestamp() >= run_after AS due, clock_timestamp() - run_after < interval '5 seconds' AS on_time
  FROM bgexec.job WHERE id = :f;
-- so does reschedule: a job moved to 300 ms from now wakes the worker then
-- (a mutation test: a reschedule without its wake slept to the poll)
SELECT bgexec.submit('noop', queue => 'wq', run_after => now() + interval '1 hour') AS r \gset
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT bgexec.reschedule(:r, now() + interval '300 ms') IS NOT NULL AS moved;
SELECT jobs FROM bgexec.await_work('ww', '{wq}', 2, '10 seconds');
SELECT clock_timestamp() >= run_after AS due, clock_timestamp() - run_after < interval '5 seconds' AS on_time
  FROM bgexec.job WHERE id = :r;
-- stop: the worker holding the lease is woken with stop, another is not
SELECT bgexec.submit('noop', queue => 'ws') AS s1 \gset
SELECT bgexec.submit('noop', queue => 'ws') AS s2 \gset
SELECT count(*) FROM bgexec.claim('ww', '{ws}', 1);
SELECT count(*) FROM bgexec.claim('wz', '{ws}', 1);
SELECT bgexec.stop(id) FROM bgexec.job WHERE queue = 'ws' AND lease_owner = 'wz';
SELECT * FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT bgexec.stop(id) FROM bgexec.job WHERE queue = 'ws' AND lease_owner = 'ww';
SELECT * FROM bgexec.await_work('ww', '{wq}', 2, '0');
SELECT * FROM bgexec.await_work('ww', '{wq}', 2, '0');
-- a job wake and a stop wake of one name (queue wk, worker wk) in one
-- transaction are two wakes, in either order (a mutation test: a request
-- merged with one of the other kind was lost)
SELECT bgexec.submit('noop', queue => 'wk') AS k1 \gset
SELECT job_id = :k1 AS claimed FROM bgexec.claim('wk', '{wk}', 1);
SELECT * FROM bgexec.await_work('wk', '{wk}', 2, '0');
BEGIN;
SELECT bgexec.submit('noop', queue => 'wk') AS k2 \gset
SELECT bgexec.stop(:k1);
COMMIT;
SELECT * FROM bgexec.await_work('wk', '{wk}', 2, '0');
SELECT job_id = :k2 AS claimed FROM bgexec.claim('wk', '{wk}', 1);
BEGIN;
SELECT bgexec.stop(:k2);
SELECT bgexec.submit('noop', queue => 'wk') > 0 AS submitted;
COMMIT;
SELECT * FROM bgexec.await_work('wk', '{wk}', 2, '0');
DELETE FROM bgexec.job WHERE queue = 'wk';
-- statement_timeout shorter than the wait: returns before it (half a second
-- before), not cancelled
SET statement_timeout = '2s';
SELECT * FROM bgexec.await_work('ww', '{wq}', 2, '10 seconds');
RESET statement_timeout;
-- a worker of more than 32 queues (kept in a filter) is woken for its
-- queues, not for every queue (it took the wakes of other workers' jobs,
-- and claimed nothing), and leaves the jobs due later to its poll (a false
-- match of the filter would take those of other workers' queues)
SELECT array_agg('q' || i) AS many FROM generate_series(1, 33) i \gset
SELECT jobs FROM bgexec.await_work('wa', :'many', 2, '0');
SELECT bgexec.submit('noop', queue => 'elsewhere') > 0 AS submitted;
SELECT jobs FROM bgexec.await_work('wa', :'many', 2, '0');
SELECT bgexec.submit('noop', queue => 'q33') > 0 AS submitted;
SELECT jobs FROM bgexec.await_work('wa', :'many', 2, '0');
DELETE FROM bgexec.job WHERE queue = 'q33';
SELECT bgexec.submit('noop', queue => 'q1', run_after => now() + interval '50 ms') > 0 AS later;
SELECT pg_sleep(0.2);
SELECT jobs FROM bgexec.await_work('wa', :'many', 2, '0');
-- await_claim: the backend that waited claims, once woken for jobs (the
-- wait itself is await_work's; isolation await-claim has the submit land
-- during the wait)
SELECT * FROM try($$SELECT * FROM bgexec.await_claim('wc', '{wc}', 1, '0', '0')$$);
SELECT * FROM try($$SELECT * FROM bgexec.await_claim('wc', '{wc}', -1, '0')$$);
SELECT * FROM try($$SELECT * FROM bgexec.await_claim('wc', '{wc}', 1, '0', max_jobs => -1)$$);
-- over claim's bound: refused before the wait, not by claim after a wake
SELECT * FROM try($$SELECT * FROM bgexec.await_claim('wc', '{wc}', 1, '0', max_jobs => 10001)$$);
SET ROLE regress_alice;
SELECT * FROM try($$SELECT * FROM bgexec.await_claim('wc', '{wc}', 1, '0')$$);
RESET ROLE;
SET ROLE regress_worker;
SELECT woken, stop, job_id FROM bgexec.await_claim('wc', '{wc}', 2, '0');  -- registers
RESET ROLE;
SELECT bgexec.submit('noop', queue => 'wc') AS c1 \gset
SELECT bgexec.submit('noop', queue => 'wc') AS c2 \gset
SELECT bgexec.submit('noop', queue => 'wc') AS c3 \gset
SET ROLE regress_worker;
-- woken: claims up to free, in claim order, with claim's lease
SELECT woken, stop, job_id = :c1 AS first, attempt, started_seq,
       lease_expires_at - clock_timestamp() BETWEEN interval '1 minute' AND interval '2 minutes' AS lease_for
  FROM bgexec.await_claim('wc', '{wc}', 1, '10 seconds', '2 minutes');
RESET ROLE;
SELECT j.status, j.lease_owner, j.started_at = e.created_at AS started_event_at_claim
  FROM bgexec.job j JOIN bgexec.job_event e ON e.job_id = j.id AND e.kind = 'started'
 WHERE j.id = :c1;
-- not woken: claims nothing, although c2 and c3 are queued (the wake was taken)
SELECT woken, stop, job_id FROM bgexec.await_claim('wc', '{wc}', 2, '0');
SELECT count(*) AS still_queued FROM bgexec.job WHERE queue = 'wc' AND status = 'queued';
-- woken, but another claimer was first: one row of flags, no job
SELECT bgexec.submit('noop', queue => 'wc') > 0 AS submitted;
SELECT count(*) FROM bgexec.claim('wz', '{wc}', 10);
SELECT woken, stop, job_id FROM bgexec.await_claim('wc', '{wc}', 2, '0');
-- woken, max_jobs 0 (the caller claims for itself, a backlog): counted on
-- for the wake, no claim
SELECT bgexec.submit('noop', queue => 'wc') > 0 AS submitted;
SELECT woken, stop, job_id FROM bgexec.await_claim('wc', '{wc}', 2, '0', max_jobs => 0);
SELECT count(*) AS still_queued FROM bgexec.job WHERE queue = 'wc' AND status = 'queued';
SELECT count(*) FROM bgexec.claim('wz', '{wc}', 10);
-- free over claim's bound: the claim takes up to the bound (it failed after
-- the wake, which it had used up)
SELECT bgexec.submit('noop', queue => 'wc') > 0 AS submitted;
SELECT woken, stop, job_id IS NOT NULL AS claimed FROM bgexec.await_claim('wc', '{wc}', 20000, '0');
-- woken with no slot free (the wake kept from before it filled up): no claim
SELECT bgexec.submit('noop', queue => 'wc') > 0 AS submitted;
SELECT woken, stop, job_id FROM bgexec.await_claim('wc', '{wc}', 0, '0');
SELECT count(*) AS still_queued FROM bgexec.job WHERE queue = 'wc' AND status = 'queued';
-- stop of a job it holds: the flag alone
SELECT bgexec.stop(:c1);
SELECT woken, stop, job_id FROM bgexec.await_claim('wc', '{wc}', 2, '0');
-- a running job of a capped queue ending makes its next job claimable, which
-- no submit announces: finish (completed through finish_many, failed
-- through finish) wakes a waiting worker; a queue without caps wakes no one
SELECT (bgexec.configure_queue('wcap', max_running => 1)).max_running;
SELECT count(*) FROM bgexec.submit_many('[{"kind": "noop", "queue": "wcap"}, {"kind": "noop", "queue": "wcap"},
                                          {"kind": "noop", "queue": "wcap", "max_attempts": 1}]');
SELECT job_id AS k1, lease AS l1 FROM bgexec.claim('wz', '{wcap}', 5) \gset
SELECT woken, job_id FROM bgexec.await_claim('wc', '{wcap}', 2, '0');  -- registers
SELECT status FROM bgexec.finish_many(jsonb_build_array(jsonb_build_object(
         'job_id', :k1, 'lease', :l1, 'outcome', 'completed')));
SELECT woken, job_id IS NOT NULL AS claimed FROM bgexec.await_claim('wc', '{wcap}', 2, '0');
SELECT id AS k2, lease AS l2 FROM bgexec.job WHERE queue = 'wcap' AND status = 'running' \gset
SELECT bgexec.finish(:k2, :l2, 'failed', '{"message": "x", "retryable": false}');
SELECT woken, job_id IS NOT NULL AS claimed FROM bgexec.await_claim('wc', '{wcap}', 2, '0');
-- a stop of a queued or suspended job frees no running slot: it wakes no one
SELECT bgexec.submit('noop', queue => 'wcap') AS q4 \gset
SELECT woken, job_id FROM bgexec.await_claim('wc', '{wcap}', 2, '0');  -- the submit's; the cap is full
SELECT bgexec.stop(:q4);
SELECT woken, job_id FROM bgexec.await_claim('wc', '{wcap}', 2, '0');
SELECT bgexec.submit('noop', queue => 'wuncapped') AS u \gset
SELECT woken FROM bgexec.await_claim('wc', '{wuncapped}', 2, '0');  -- registers
SELECT lease AS ul FROM bgexec.claim('wz', '{wuncapped}', 1) \gset
SELECT status FROM bgexec.finish_many(jsonb_build_array(jsonb_build_object(
         'job_id', :u, 'lease', :ul, 'outcome', 'completed')));
SELECT woken FROM bgexec.await_claim('wc', '{wuncapped}', 2, '0');
DELETE FROM bgexec.job WHERE queue IN ('wq', 'ws', 'elsewhere', 'q1', 'wc', 'wcap', 'wuncapped');
DELETE FROM bgexec.queue WHERE name IN ('wq', 'wcap');
-- a wake that finds a worker between two calls with its capacity used up
-- (the wake that ended its last wait took it all) is kept for its next call
-- with capacity: a capped queue's next job, made claimable by the finish of
-- the running one while its worker was between calls, was left to the poll.
-- The wait has to be asleep when the first wake comes: a second session.
CREATE EXTENSION IF NOT EXISTS dblink;
-- Until the second session's await_work of that worker sleeps on its latch.
CREATE FUNCTION pg_temp.wait_asleep(worker text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..3000 LOOP
		PERFORM pg_stat_clear_snapshot();
		PERFORM FROM pg_stat_activity
		 WHERE query LIKE '%await_work(''' || worker || '''%' AND wait_event_type = 'Extension';
		IF FOUND THEN RETURN; END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RAISE EXCEPTION 'the wait did not start';
END $$;
SELECT dblink_connect('wm', format('host=%s port=%s dbname=%s user=%s',
              split_part(current_setting('unix_socket_directories'), ',', 1),
              current_setting('port'), current_database(), current_user)) AS connected;
SELECT (bgexec.configure_queue('wm', max_running => 1)).max_running;
SELECT * FROM dblink('wm', $$SELECT jobs FROM bgexec.await_work('wm', '{wm}', 2, '0')$$) AS r(jobs boolean);
SELECT dblink_send_query('wm', $$SELECT jobs FROM bgexec.await_work('wm', '{wm}', 2, '60 s')$$) AS sent;
SELECT pg_temp.wait_asleep('wm');
-- three jobs, the worker's two slots: the wake takes them all
SELECT count(*) FROM bgexec.submit_many('[{"kind": "noop", "queue": "wm"}, {"kind": "noop", "queue": "wm"},
                                          {"kind": "noop", "queue": "wm"}]');
SELECT * FROM dblink_get_result('wm') AS r(jobs boolean);
SELECT * FROM dblink_get_result('wm') AS r(jobs boolean);
-- it claims one (the cap), which ends before its next call
SELECT job_id AS m1, lease AS ml1 FROM bgexec.claim('wm', '{wm}', 2) \gset
SELECT status FROM bgexec.finish_many(jsonb_build_array(jsonb_build_object(
         'job_id', :m1, 'lease', :ml1, 'outcome', 'completed')));
-- the next call, with a slot free, returns at once; one with none does not
-- take it (the one after, with a slot, does)
SELECT * FROM dblink('wm', $$SELECT jobs FROM bgexec.await_work('wm', '{wm}', 0, '0')$$) AS r(jobs boolean);
SELECT clock_timestamp() AS t0 \gset
SELECT * FROM dblink('wm', $$SELECT jobs FROM bgexec.await_work('wm', '{wm}', 2, '10 s')$$) AS r(jobs boolean);
SELECT clock_timestamp() - :'t0' < interval '5 seconds' AS at_once;
SELECT dblink_disconnect('wm');
DROP EXTENSION dblink;
DELETE FROM bgexec.job WHERE queue = 'wm';
DELETE FROM bgexec.queue WHERE name = 'wm';
-- due times: a transaction keeps the 256 earliest of each subtransaction
-- level, merged by queue and time (a reconcile re-queues thousands of jobs,
-- each due at its own time).  The worker of wd sleeps until its queue's
-- earliest, recorded four times: twice, after many later times of another
-- queue in descending order, once in a released subtransaction, and once
-- by the next transaction; the many earlier times of a subtransaction
-- rolled back are dropped.
SELECT jobs FROM bgexec.await_work('wd', '{wd}', 2, '0');
BEGIN;
SELECT now() + interval '300 ms' AS due \gset
SELECT count(bgexec._jobs_due('wd2', now() + interval '20 s' + i * interval '1 ms', 1))
  FROM generate_series(600, 1, -1) i;
SELECT count(bgexec._jobs_due('wd', :'due', 1)) FROM generate_series(1, 2);
SAVEPOINT s;
SELECT count(bgexec._jobs_due('wd', now() + interval '100 ms' + i * interval '1 us', 1))
  FROM generate_series(1, 2000) i;
ROLLBACK TO SAVEPOINT s;
SAVEPOINT t;
SELECT count(bgexec._jobs_due('wd', :'due', 1));
SELECT count(bgexec._jobs_due('wd2', now() + interval '21 s' + i * interval '1 ms', 1))
  FROM generate_series(1, 600) i;
RELEASE SAVEPOINT t;
COMMIT;
SELECT count(bgexec._jobs_due('wd', :'due', 1));
-- woken when due, for four jobs: as many as the calls' free slots, no more
SELECT jobs, clock_timestamp() >= :'due' AS due FROM bgexec.await_work('wd', '{wd}', 2, '10 s');
SELECT jobs FROM bgexec.await_work('wd', '{wd}', 1, '0');
SELECT jobs FROM bgexec.await_work('wd', '{wd}', 1, '0');
SELECT jobs FROM bgexec.await_work('wd', '{wd}', 2, '0');
-- nothing is due of what a rolled-back subtransaction recorded, however many
BEGIN;
SAVEPOINT s;
SELECT count(bgexec._jobs_due('wd', now() + interval '100 ms' + i * interval '1 ms', 1))
  FROM generate_series(1, 2000) i;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT jobs FROM bgexec.await_work('wd', '{wd}', 2, '500 ms');
-- a worker asleep when due times of its queue commit is woken to sleep
-- until its queue's earliest, not until its timeout (among more times of
-- another queue than the table keeps, later, and later ones of its own,
-- due after its timeout).  (A backend's own timer, PostgreSQL's idle stats
-- flush, sets its latch up to 10 s after its previous statement: a wait
-- not woken for the due time finds it then.)
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT dblink_connect('wl', format('host=%s port=%s dbname=%s user=%s',
              split_part(current_setting('unix_socket_directories'), ',', 1),
              current_setting('port'), current_database(), current_user)) AS connected;
SELECT * FROM dblink('wl', $$SELECT jobs FROM bgexec.await_work('wl', '{wl}', 2, '0')$$) AS r(jobs boolean);
SELECT dblink_send_query('wl', $$SELECT jobs FROM bgexec.await_work('wl', '{wl}', 2, '30 s')$$) AS sent;
SELECT pg_temp.wait_asleep('wl');
SELECT clock_timestamp() AS t0 \gset
BEGIN;
SELECT count(bgexec._jobs_due('wl2', now() + interval '50 s' + i * interval '1 ms', 1))
  FROM generate_series(1, 300) i;
SELECT count(bgexec._jobs_due('wl', now() + interval '40 s' + i * interval '1 ms', 1))
  FROM generate_series(1, 100) i;
SELECT count(bgexec._jobs_due('wl', now() + interval '300 ms', 1));
COMMIT;
SELECT * FROM dblink_get_result('wl') AS r(jobs boolean);
SELECT * FROM dblink_get_result('wl') AS r(jobs boolean);
SELECT clock_timestamp() - :'t0' < interval '5 seconds' AS before_its_timeout;
SELECT dblink_disconnect('wl');
DROP EXTENSION dblink;
-- the table full, a due time earlier than its latest entry takes that
-- entry's place (a mutation test: it was dropped when the table's earliest
-- was earlier still, and its worker slept to its timeout)
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT dblink_connect('wf', format('host=%s port=%s dbname=%s user=%s',
              split_part(current_setting('unix_socket_directories'), ',', 1),
              current_setting('port'), current_database(), current_user)) AS connected;
SELECT * FROM dblink('wf', $$SELECT jobs FROM bgexec.await_work('wf', '{wf}', 2, '0')$$) AS r(jobs boolean);
SELECT count(bgexec._jobs_due('wf2', now() + interval '1 s' + i * interval '100 ms', 1))
  FROM generate_series(1, 300) i;
SELECT dblink_send_query('wf', $$SELECT jobs FROM bgexec.await_work('wf', '{wf}', 2, '30 s')$$) AS sent;
SELECT pg_temp.wait_asleep('wf');
SELECT clock_timestamp() AS t0 \gset
SELECT count(bgexec._jobs_due('wf', now() + interval '3 s', 1));
SELECT * FROM dblink_get_result('wf') AS r(jobs boolean);
SELECT * FROM dblink_get_result('wf') AS r(jobs boolean);
SELECT clock_timestamp() - :'t0' < interval '8 seconds' AS before_its_timeout;
SELECT dblink_disconnect('wf');
DROP EXTENSION dblink;
-- every due time of a transaction up to the table's size is kept, not only
-- its first few (a mutation test): three of one queue, each due in turn
SELECT count(bgexec._jobs_due('wv', now() + i * interval '100 ms', 1)) FROM generate_series(1, 3) i;
SELECT pg_sleep(0.5);
SELECT jobs FROM bgexec.await_work('wv', '{wv}', 1, '0');
SELECT jobs FROM bgexec.await_work('wv', '{wv}', 1, '0');
SELECT jobs FROM bgexec.await_work('wv', '{wv}', 1, '0');
SELECT jobs FROM bgexec.await_work('wv', '{wv}', 1, '0');
-- a due time is told apart by database: one of another database at the same
-- queue name and time is not merged with it (a mutation test: it was, and
-- this database's worker was not woken)
CREATE DATABASE regress_wake_other;
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT dblink_connect('wo', format('host=%s port=%s dbname=regress_wake_other user=%s',
              split_part(current_setting('unix_socket_directories'), ',', 1),
              current_setting('port'), current_user)) AS connected;
SELECT dblink_exec('wo', 'CREATE EXTENSION bgexec');
SELECT now() + interval '200 ms' AS due \gset
SELECT * FROM dblink('wo', format('SELECT count(bgexec._jobs_due(%L, %L, 1))', 'wx', :'due')) AS r(n bigint);
SELECT count(bgexec._jobs_due('wx', :'due', 1));
SELECT pg_sleep(0.5);
SELECT jobs FROM bgexec.await_work('wx', '{wx}', 1, '0');
SELECT dblink_disconnect('wo');
DROP EXTENSION dblink;
DROP DATABASE regress_wake_other;
-- counts near 2^63 are capped on entry: two of them in one transaction summed
-- past INT64_MAX (wrapped to -2: the wake and the due time were lost)
SELECT jobs FROM bgexec.await_work('wy', '{wy}', 1, '0');  -- registers
BEGIN;
SELECT bgexec._jobs_ready('wy', 9223372036854775807), bgexec._jobs_ready('wy', 9223372036854775807);
COMMIT;
SELECT jobs FROM bgexec.await_work('wy', '{wy}', 1, '0');
SELECT now() + interval '200 ms' AS due \gset
BEGIN;
SELECT bgexec._jobs_due('wy', :'due', 9223372036854775807), bgexec._jobs_due('wy', :'due', 9223372036854775807);
COMMIT;
SELECT pg_sleep(0.5);
SELECT jobs FROM bgexec.await_work('wy', '{wy}', 1, '0');
-- and the due time of two such counts wakes every sleeper of its queue:
-- wrapped negative (uncapped on entry), it woke one of two
SELECT jobs FROM bgexec.await_work('wz1', '{wzq}', 1, '0');  -- registers
SELECT jobs FROM bgexec.await_work('wz2', '{wzq}', 1, '0');  -- registers
SELECT now() + interval '200 ms' AS due \gset
BEGIN;
SELECT bgexec._jobs_due('wzq', :'due', 9223372036854775807), bgexec._jobs_due('wzq', :'due', 9223372036854775807);
COMMIT;
SELECT pg_sleep(0.5);
SELECT jobs AS first FROM bgexec.await_work('wz1', '{wzq}', 1, '0');
SELECT jobs AS second FROM bgexec.await_work('wz2', '{wzq}', 1, '0');

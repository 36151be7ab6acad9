-- many_queues: a claim over many queues locks only the jobs it returns
-- (rev-card F1).  Each queue's candidates were read FOR UPDATE SKIP LOCKED
-- before the claim order cut them to max_jobs: a claim of 4 over 2 000
-- queues locked (and WAL-logged) up to 8 000 rows, held the ones it did not
-- take until it committed, and every other claimer of those queues, even
-- one naming a single queue, found nothing meanwhile.
\set SHOW_CONTEXT never
-- 20 queues of 3 jobs each; mq7's last job at priority 5, mq3's at 1
INSERT INTO bgexec.job (queue, kind, owner, priority, payload)
SELECT 'mq' || q, 'noop', current_user,
       CASE WHEN (q, i) = (7, 3) THEN 5 WHEN (q, i) = (3, 3) THEN 1 ELSE 0 END,
       jsonb_build_object('n', format('%s.%s', q, i))
  FROM generate_series(1, 20) q, generate_series(1, 3) i ORDER BY q, i;
-- the jobs this transaction holds locked and left queued
CREATE FUNCTION pg_temp.locked_queued(OUT locked bigint, OUT queued bigint) LANGUAGE sql AS $$
	SELECT count(*) FILTER (WHERE j.xmax = pg_current_xact_id()::xid), count(*)
	  FROM bgexec.job j WHERE j.queue LIKE 'mq%' AND j.status = 'queued' $$;
CREATE FUNCTION pg_temp.claimed(w text, n int) RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(c.payload->>'n', ',' ORDER BY ord)
	  FROM bgexec.claim(w, ARRAY(SELECT 'mq' || q FROM generate_series(1, 20) q), n)
	       WITH ORDINALITY c(job_id, lease, queue, kind, owner, payload, attempt, max_attempts,
	                         deadline, lease_expires_at, completed_steps, completed_stdout,
	                         started_seq, ord) $$;
-- Uncapped: the claim takes 4 in claim order (priority, run_after, id) and
-- locks none of the 56 it leaves queued (old SQL: 56)
BEGIN;
SELECT pg_temp.claimed('wm', 4) AS claimed;
SELECT * FROM pg_temp.locked_queued();
-- and the next claim in the transaction goes on from there
SELECT pg_temp.claimed('wm', 3) AS claimed;
SELECT * FROM pg_temp.locked_queued();
ROLLBACK;
-- A job not yet due takes no share of the claim: fa's priority-5 job is due
-- tomorrow, so a claim of 2 takes fa's first and fb's (due before fa's
-- second), not fa's first two (the unlocked read counted fa's future job
-- for fa, and the locked scan then took fa's next due one in its place)
BEGIN;
INSERT INTO bgexec.job (queue, kind, owner, priority, payload, run_after) VALUES
  ('fa', 'noop', current_user, 5, '{"n": "fa-tomorrow"}', now() + interval '1 day'),
  ('fa', 'noop', current_user, 0, '{"n": "fa1"}', now() - interval '3 seconds'),
  ('fb', 'noop', current_user, 0, '{"n": "fb1"}', now() - interval '2 seconds'),
  ('fa', 'noop', current_user, 0, '{"n": "fa2"}', now() - interval '1 second');
SELECT string_agg(c.payload->>'n', ',' ORDER BY c.job_id) AS claimed
  FROM bgexec.claim('wf', ARRAY['fa', 'fb'], 2) c;
ROLLBACK;
-- Within a priority, in run_after order, not id order: fa's later job has
-- the smaller id; a claim of 1 takes fa's earlier one, ahead of fb's (the
-- unlocked read took each range's first by id, fa's later job, and the
-- claim took fb's)
BEGIN;
INSERT INTO bgexec.job (queue, kind, owner, priority, payload, run_after) VALUES
  ('fa', 'noop', current_user, 0, '{"n": "fa-late"}', now() - interval '1 second'),
  ('fa', 'noop', current_user, 0, '{"n": "fa-early"}', now() - interval '3 seconds'),
  ('fb', 'noop', current_user, 0, '{"n": "fb1"}', now() - interval '2 seconds');
SELECT string_agg(c.payload->>'n', ',' ORDER BY c.job_id) AS claimed
  FROM bgexec.claim('wf', ARRAY['fa', 'fb'], 1) c;
ROLLBACK;
-- Capped (max_running, and a rate limit on one queue): the same (old SQL:
-- 56 locked, up to max_jobs * 4 + 100 of each queue)
BEGIN;
SELECT count(bgexec.configure_queue('mq' || q, max_running => 100)) FROM generate_series(1, 20) q;
SELECT (bgexec.configure_queue('mq1', max_running => 100, rate_limit => 1000, rate_period => '1 hour')).name;
SELECT pg_temp.claimed('wm', 4) AS claimed;
SELECT * FROM pg_temp.locked_queued();
-- a cap that holds a queue's jobs back does not lock them either: mq7 at
-- its max_running (1 running), its next jobs are passed over
SELECT (bgexec.configure_queue('mq7', max_running => 1)).name;
SELECT pg_temp.claimed('wm', 2) AS claimed;
SELECT * FROM pg_temp.locked_queued();
ROLLBACK;
-- Capped queues with no queued job are not locked (old SQL: an exclusive
-- advisory lock each): 20 with jobs, 10 idle
SELECT count(bgexec.configure_queue(q, max_running => 100))
  FROM unnest(ARRAY(SELECT 'mq' || q FROM generate_series(1, 20) q)
              || ARRAY(SELECT 'mqidle' || q FROM generate_series(1, 10) q)) q;
BEGIN;
SELECT count(*) AS claimed FROM bgexec.claim('wm',
  ARRAY(SELECT 'mq' || q FROM generate_series(1, 20) q)
  || ARRAY(SELECT 'mqidle' || q FROM generate_series(1, 10) q), 4);
SELECT count(*) AS queue_locks FROM pg_locks
 WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' AND pid = pg_backend_pid();
ROLLBACK;
-- an uncapped queue among capped ones takes no queue lock, with a queued
-- job or not: two locks, mq1's and mq2's
BEGIN;
INSERT INTO bgexec.job (queue, kind, owner) VALUES ('mqu1', 'noop', current_user);
SELECT count(*) AS claimed FROM bgexec.claim('wm', ARRAY['mq1', 'mq2', 'mqu1', 'mqu2'], 4);
SELECT count(*) AS queue_locks FROM pg_locks
 WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' AND pid = pg_backend_pid();
ROLLBACK;
-- the idle ones alone: nothing claimed, nothing locked
BEGIN;
SELECT count(*) AS claimed FROM bgexec.claim('wm', ARRAY(SELECT 'mqidle' || q FROM generate_series(1, 10) q), 4);
SELECT count(*) AS queue_locks FROM pg_locks
 WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' AND pid = pg_backend_pid();
ROLLBACK;
-- and still refused outside READ COMMITTED, idle or not (0A000, naming
-- the first capped queue)
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM bgexec.claim('wm', ARRAY(SELECT 'mqidle' || q FROM generate_series(1, 10) q), 4);
ROLLBACK;
DELETE FROM bgexec.job WHERE queue LIKE 'mq%';
DELETE FROM bgexec.queue WHERE name LIKE 'mq%';
-- Of more than 32 queues, only those with queued jobs are read (one skip
-- scan of job_runnable_idx over the range of names): a claim over 2 000
-- empty queues and hz, with two jobs, takes them in a few index scans
-- (old SQL: one or more per queue named, 2 006)
CREATE FUNCTION pg_temp.runnable_scans() RETURNS bigint LANGUAGE sql AS $$
	SELECT pg_stat_get_xact_numscans('bgexec.job_runnable_idx'::regclass) $$;
CREATE FUNCTION pg_temp.claimed_of(w text, queues text[], n int) RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(c.payload->>'n', ',' ORDER BY ord)
	  FROM bgexec.claim(w, queues, n)
	       WITH ORDINALITY c(job_id, lease, queue, kind, owner, payload, attempt, max_attempts,
	                         deadline, lease_expires_at, completed_steps, completed_stdout,
	                         started_seq, ord) $$;
BEGIN;
INSERT INTO bgexec.job (queue, kind, owner, payload) VALUES
  ('hz', 'noop', current_user, '{"n": "hz1"}'), ('hz', 'noop', current_user, '{"n": "hz2"}');
SELECT pg_temp.runnable_scans() AS scans_before \gset
SELECT pg_temp.claimed_of('wh', ARRAY(SELECT 'he' || g FROM generate_series(1, 2000) g) || '{hz}', 4) AS claimed;
SELECT pg_temp.runnable_scans() - :scans_before < 20 AS few_scans;
ROLLBACK;
-- the lowest name of the range has the only job of a queue named (the
-- scan starts at it); he1a, within the range but not named, is not claimed
BEGIN;
INSERT INTO bgexec.job (queue, kind, owner, payload) VALUES ('he1', 'noop', current_user, '{"n": "he1.1"}'),
  ('he1a', 'noop', current_user, '{"n": "he1a.1"}');
SELECT pg_temp.claimed_of('wh', ARRAY(SELECT 'he' || g FROM generate_series(1, 2000) g), 4) AS lowest_name;
ROLLBACK;
-- above READ COMMITTED a capped queue named refuses the claim, jobs or not,
-- among many queues as among few (the skip scan runs at READ COMMITTED only)
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT (bgexec.configure_queue('he7', max_running => 1)).name;
SELECT * FROM try($$SELECT count(*) FROM bgexec.claim('wh', ARRAY(SELECT 'he' || g FROM generate_series(1, 2000) g), 4)$$);
ROLLBACK;
-- The same claim order as one by one: 40 queues named, 10 of them with
-- jobs (priority 0-2, run_after apart), among 2 000 empty ones; hp5 paused
BEGIN;
INSERT INTO bgexec.job (queue, kind, owner, priority, payload, run_after)
SELECT 'hp' || q, 'noop', current_user, (q * 7 + i) % 3,
       jsonb_build_object('n', format('%s.%s', q, i)), now() - (q * 10 + i) * interval '1 second'
  FROM generate_series(1, 10) q, generate_series(1, 3) i ORDER BY q DESC, i;
SELECT (bgexec.configure_queue('hp5', paused => true)).name;
SAVEPOINT s;
SELECT pg_temp.claimed_of('wh', ARRAY(SELECT 'hp' || g FROM generate_series(1, 40) g)
                                || ARRAY(SELECT 'he' || g FROM generate_series(1, 2000) g), 12) AS many;
ROLLBACK TO s;
-- (the 10 alone: up to 32 queues are read one by one)
SELECT pg_temp.claimed_of('wh', ARRAY(SELECT 'hp' || g FROM generate_series(1, 10) g), 12) AS one_by_one;
ROLLBACK TO s;
-- More queues with jobs in the range of names than the skip scan reads
-- (1 + names / 128): 33 names hp1, hp3, ..., hp65, and hp1a1..hp1a40 not
-- named, with a job each, sort between hp10 and hp2; the scan gives up
-- and the claim reads the names one by one: the jobs of hp1, hp3, hp7,
-- hp9 only, in claim order
INSERT INTO bgexec.job (queue, kind, owner, priority, payload)
SELECT 'hp1a' || g, 'noop', current_user, 9, jsonb_build_object('n', 'hp1a' || g)
  FROM generate_series(1, 40) g;
SELECT pg_temp.claimed_of('wh', ARRAY(SELECT 'hp' || g FROM generate_series(1, 65, 2) g), 12) AS stopped_short;
ROLLBACK TO s;
-- Capped among many: hp2 at max_running 1 gives one
SELECT (bgexec.configure_queue('hp2', max_running => 1)).name;
SELECT pg_temp.claimed_of('wh', ARRAY(SELECT 'hp' || g FROM generate_series(1, 40) g)
                                || ARRAY(SELECT 'he' || g FROM generate_series(1, 2000) g), 12) AS capped;
ROLLBACK;
DELETE FROM bgexec.queue WHERE name LIKE 'hp%';

-- caps_running: a claim of a queue with max_running_per_key counts the
-- running jobs of the keys that matter, not every running job of the
-- queue.  It built a map of the running count of every key of the queue
-- (and counted them all once more) under the queue's claim lock: with
-- 10 080 running, a claim took 91-134 ms, ~10 claims/s for the whole
-- fleet (rev-card F4).  Its reads of job_running_key_idx are bounded here
-- with 3 000 running, in each way the claim counts: the keys with queued
-- jobs (few keys), and the candidates' keys one by one (many keys).
\set SHOW_CONTEXT never
SELECT (bgexec.configure_queue('krun', max_running_per_key => 1)).name;
-- 3 000 running jobs, each of its own key (written directly, then claimed)
INSERT INTO bgexec.job (queue, kind, owner, concurrency_key)
SELECT 'krun', 'noop', current_user, 'k' || n FROM generate_series(1, 3000) n;
SELECT count(*) AS running FROM bgexec.claim('w', '{krun}', 3000);
-- a job queued behind each of the first 50 keys (at their cap), then two
-- of a fresh key g and one of fresh keys f1, f2
INSERT INTO bgexec.job (queue, kind, owner, concurrency_key)
SELECT 'krun', 'noop', current_user, 'k' || n FROM generate_series(1, 50) n;
INSERT INTO bgexec.job (queue, kind, owner, concurrency_key)
VALUES ('krun', 'noop', current_user, 'g'), ('krun', 'noop', current_user, 'g'),
       ('krun', 'noop', current_user, 'f1'), ('krun', 'noop', current_user, 'f2');
-- The keys a claim takes, and whether it read fewer than 1 000 entries of
-- job_running_key_idx (the old map read all 3 000, twice).
CREATE FUNCTION pg_temp.claim_keys(n int, OUT keys text, OUT bounded bool)
	LANGUAGE plpgsql AS $$
DECLARE
	v_before bigint := pg_stat_get_xact_tuples_returned('bgexec.job_running_key_idx'::regclass);
BEGIN
	SELECT string_agg(j.concurrency_key, ',' ORDER BY j.concurrency_key) INTO keys
	  FROM bgexec.claim('w', '{krun}', n) c JOIN bgexec.job j ON j.id = c.job_id;
	bounded := pg_stat_get_xact_tuples_returned('bgexec.job_running_key_idx'::regclass) - v_before < 1000;
END
$$;
-- 54 keys with queued jobs: their counts; one of g, f1 and f2, none of a
-- capped key
BEGIN;
SELECT * FROM pg_temp.claim_keys(3);
COMMIT;
-- 300 keys with queued jobs (more than the window): each candidate's key
-- counted as the scan meets it, and by the walk as it admits it: one of h,
-- not two, and f3
INSERT INTO bgexec.job (queue, kind, owner, concurrency_key)
SELECT 'krun', 'noop', current_user, 'k' || n FROM generate_series(51, 300) n;
INSERT INTO bgexec.job (queue, kind, owner, concurrency_key)
VALUES ('krun', 'noop', current_user, 'h'), ('krun', 'noop', current_user, 'h'),
       ('krun', 'noop', current_user, 'f3');
BEGIN;
SELECT * FROM pg_temp.claim_keys(5);
COMMIT;
-- nothing more to take: every key with a queued job is at its cap
BEGIN;
SELECT * FROM pg_temp.claim_keys(5);
COMMIT;
-- never more than one running job of a key
SELECT count(*) AS running, count(DISTINCT concurrency_key) AS keys
  FROM bgexec.job WHERE queue = 'krun' AND status = 'running';
-- (the jobs go: the files after this one see no running jobs of theirs)
DELETE FROM bgexec.job WHERE queue = 'krun';
-- A window full of a few keys' backlogs: 200 keys x 50 jobs submitted key
-- by key, per_key 1.  The window of a claim of 10 (140 rows) held three
-- keys' jobs, and the claim took 3 (rev-card F4); it reads on past the
-- keys it brought to their cap and takes 10, one of each key.
SELECT (bgexec.configure_queue('kwin', max_running_per_key => 1)).name;
INSERT INTO bgexec.job (queue, kind, owner, concurrency_key)
SELECT 'kwin', 'noop', current_user, 'w' || lpad(k::text, 3, '0')
  FROM generate_series(1, 200) k, generate_series(1, 50) n ORDER BY k, n;
SELECT count(*) AS claimed, count(DISTINCT j.concurrency_key) AS keys
  FROM bgexec.claim('w', '{kwin}', 10) c JOIN bgexec.job j ON j.id = c.job_id;
-- and the next claim the next ten keys'
SELECT string_agg(j.concurrency_key, ',' ORDER BY j.concurrency_key) AS keys
  FROM bgexec.claim('w', '{kwin}', 10) c JOIN bgexec.job j ON j.id = c.job_id;
DELETE FROM bgexec.job WHERE queue = 'kwin';
-- The rounds are for keys the walk capped only: a claim that max_running
-- stops short of max_jobs, with a full window, reads it once (140 entries
-- of job_runnable_idx for a claim of 10, not twice as many).
SELECT (bgexec.configure_queue('kmax', max_running => 5)).name;
INSERT INTO bgexec.job (queue, kind, owner) SELECT 'kmax', 'noop', current_user FROM generate_series(1, 1000);
BEGIN;
SELECT pg_stat_get_xact_tuples_returned('bgexec.job_runnable_idx'::regclass) AS read0 \gset
SELECT count(*) AS claimed FROM bgexec.claim('w', '{kmax}', 10);
SELECT pg_stat_get_xact_tuples_returned('bgexec.job_runnable_idx'::regclass) - :read0 < 200 AS one_round;
COMMIT;
DELETE FROM bgexec.job WHERE queue = 'kmax';
-- A queue's max_running is compared with its running count up to the cap:
-- every claim counted all of the queue's running jobs under its claim lock
-- (5 000 running, cap 5 000: each claim read 5 000 entries of
-- job_running_key_idx).  Here 3 000 running, max_running 3 010: a claim of
-- 20 takes 10 and reads up to 3 010; at the cap, a claim takes nothing and
-- reads no more than the cap; a lower cap reads the lower count.
SELECT (bgexec.configure_queue('kcap', max_running => 3010)).name;
INSERT INTO bgexec.job (queue, kind, owner) SELECT 'kcap', 'noop', current_user FROM generate_series(1, 3020);
SELECT count(*) AS running FROM bgexec.claim('w', '{kcap}', 3000);
BEGIN;
SELECT pg_stat_get_xact_tuples_returned('bgexec.job_running_key_idx'::regclass) AS read0 \gset
SELECT count(*) AS claimed FROM bgexec.claim('w', '{kcap}', 20);
SELECT pg_stat_get_xact_tuples_returned('bgexec.job_running_key_idx'::regclass) - :read0 <= 3010 AS bounded;
COMMIT;
SELECT (bgexec.configure_queue('kcap', max_running => 100)).name;
BEGIN;
SELECT pg_stat_get_xact_tuples_returned('bgexec.job_running_key_idx'::regclass) AS read0 \gset
SELECT count(*) AS claimed FROM bgexec.claim('w', '{kcap}', 5);
SELECT pg_stat_get_xact_tuples_returned('bgexec.job_running_key_idx'::regclass) - :read0 <= 100 AS bounded;
COMMIT;
SELECT count(*) AS running FROM bgexec.job WHERE queue = 'kcap' AND status = 'running';
DELETE FROM bgexec.job WHERE queue = 'kcap';
-- The isolation level is checked once a claim, however many capped queues
-- it names: the lock loop checked it again for each (a claim over 2 000
-- capped queues called the check 2 001 times).  Three capped queues and
-- one, each claim one check.
SET track_functions = 'all';
SELECT (bgexec.configure_queue(q, max_running => 5)).name FROM unnest('{rc1,rc2,rc3}'::text[]) q;
INSERT INTO bgexec.job (queue, kind, owner)
SELECT q, 'noop', current_user FROM unnest('{rc1,rc2,rc3}'::text[]) q, generate_series(1, 3);
-- (the calls counted so far this session, not yet reported: a difference)
SELECT coalesce(pg_stat_get_xact_function_calls('bgexec._require_read_committed(text,text)'::regprocedure), 0) AS calls0 \gset
SELECT count(*) AS claimed FROM bgexec.claim('w', '{rc1,rc2,rc3}', 4);
SELECT pg_stat_get_xact_function_calls('bgexec._require_read_committed(text,text)'::regprocedure) - :calls0 AS checks;
SELECT coalesce(pg_stat_get_xact_function_calls('bgexec._require_read_committed(text,text)'::regprocedure), 0) AS calls0 \gset
SELECT count(*) AS claimed FROM bgexec.claim('w', '{rc3}', 6);
SELECT pg_stat_get_xact_function_calls('bgexec._require_read_committed(text,text)'::regprocedure) - :calls0 AS checks;
RESET track_functions;
DELETE FROM bgexec.job WHERE queue IN ('rc1', 'rc2', 'rc3');

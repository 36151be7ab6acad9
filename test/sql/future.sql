-- future: jobs not yet due, of a higher priority than the due ones, cost a
-- claim of the due ones nothing per job.  A single scan of job_runnable_idx
-- in claim order read (and filtered) every one of them before it reached
-- the first due job: 50 000 jobs scheduled for tomorrow at priority 10 cost
-- each claim of today's priority 0 jobs 250 index pages (scale review F8).
-- The claim reads one range per priority instead, each up to its first job
-- not yet due.
\set SHOW_CONTEXT never
BEGIN;
-- 15 000 jobs due in a day at priority 10, in an uncapped and a capped
-- queue (written directly: submit_many takes seconds for as many)
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after)
SELECT q, 'noop', current_user, 10, now() + interval '1 day'
  FROM generate_series(1, 15000), unnest('{futq,futc}'::text[]) q;
SELECT (bgexec.configure_queue('futc', max_running => 100)).name;
-- due ones around them: priorities 10, 7 (one due, one not), 5 and 0,
-- run_after in the past in a mixed order
SELECT count(*) FROM (
  SELECT bgexec.submit('noop', jsonb_build_object('n', n), queue => q, priority => p,
                       run_after => now() + ra)
    FROM (VALUES ('p0-late', 0, '-1 minute'::interval), ('p0-early', 0, '-2 minutes'),
                 ('p5', 5, '-1 minute'), ('p7-future', 7, '1 hour'), ('p7', 7, '-1 second'),
                 ('p10', 10, '-1 second'), ('p3', 3, '-3 minutes'))
         v(n, p, ra), unnest('{futq,futc}'::text[]) q) s;
-- (submit stores a run_after in the past as now(): the mixed order written
-- here, as jobs queued over time hold it)
UPDATE bgexec.job j SET run_after = now() + v.ra
  FROM (VALUES ('p0-late', '-1 minute'::interval), ('p0-early', '-2 minutes'), ('p5', '-1 minute'),
               ('p7', '-1 second'), ('p10', '-1 second'), ('p3', '-3 minutes')) v(n, ra)
 WHERE j.queue IN ('futq', 'futc') AND j.payload->>'n' = v.n;
-- Index pages of job_runnable_idx a claim reads: the 15 000 future jobs
-- fill some 80 leaf pages (the old scan read 94 and 165 pages a claim);
-- a claim of the due ones reads two descents per priority (5 here).
CREATE FUNCTION pg_temp.pages_read(q text, n int, OUT claimed text, OUT bounded bool)
LANGUAGE plpgsql AS $$
DECLARE
	v_before bigint := pg_stat_get_xact_blocks_fetched('bgexec.job_runnable_idx'::regclass);
BEGIN
	SELECT string_agg(c.payload->>'n', ',' ORDER BY ord) INTO claimed
	  FROM bgexec.claim('wf', ARRAY[q], n) WITH ORDINALITY c(job_id, lease, queue, kind, owner, payload,
	       attempt, max_attempts, deadline, lease_expires_at, completed_steps, completed_stdout, started_seq, ord);
	bounded := pg_stat_get_xact_blocks_fetched('bgexec.job_runnable_idx'::regclass) - v_before < 50;
END $$;
-- in claim order (priority, then run_after, then id), bounded, both paths;
-- three at a time, then what is left (and nothing more)
SELECT q, r.* FROM unnest('{futq,futc}'::text[]) q, pg_temp.pages_read(q, 3) r;
SELECT q, r.* FROM unnest('{futq,futc}'::text[]) q, pg_temp.pages_read(q, 10) r;
SELECT q, r.* FROM unnest('{futq,futc}'::text[]) q, pg_temp.pages_read(q, 10) r;
-- the future job of priority 7, once due, is claimed before the priority 0 ones
SELECT count(*) FROM (SELECT bgexec.submit('noop', '{"n": "p0-new"}', queue => 'futq') UNION ALL
                      SELECT bgexec.submit('noop', '{"n": "p1-new"}', queue => 'futq', priority => 1)) s;
UPDATE bgexec.job SET run_after = now() - interval '1 hour' WHERE payload->>'n' = 'p7-future';
SELECT q, r.* FROM unnest('{futq,futc}'::text[]) q, pg_temp.pages_read(q, 10) r;
SELECT queue, status, count(*) FROM bgexec.job WHERE queue IN ('futq', 'futc') GROUP BY 1, 2 ORDER BY 1, 2;
ROLLBACK;
-- The same on the key-by-key path (a queue with max_running_per_key whose
-- capped key holds a backlog): a key's future jobs of a higher priority,
-- and the keyless ones', are not read either (old SQL: every one of them,
-- from job_runnable_key_idx)
BEGIN;
SELECT (bgexec.configure_queue('futk', max_running_per_key => 1)).name;
INSERT INTO bgexec.job (queue, kind, owner, priority, concurrency_key, run_after, payload)
SELECT 'futk', 'noop', current_user, 0, 'hot', now() - interval '1 minute', '{"n": "hot"}'
  FROM generate_series(1, 2001);
SELECT payload->>'n' AS running FROM bgexec.claim('wf', '{futk}', 1);
INSERT INTO bgexec.job (queue, kind, owner, priority, concurrency_key, run_after)
SELECT 'futk', 'noop', current_user, 10, k, now() + interval '1 day'
  FROM generate_series(1, 10000), (VALUES ('b'), (NULL)) v(k);
INSERT INTO bgexec.job (queue, kind, owner, priority, concurrency_key, run_after, payload)
VALUES ('futk', 'noop', current_user, 0, 'b', now() - interval '1 minute', '{"n": "b0"}'),
       ('futk', 'noop', current_user, 5, 'b', now() - interval '1 minute', '{"n": "b5"}'),
       ('futk', 'noop', current_user, 0, NULL, now() - interval '2 minutes', '{"n": "x0-early"}'),
       ('futk', 'noop', current_user, 0, NULL, now() - interval '1 minute', '{"n": "x0-late"}'),
       ('futk', 'noop', current_user, 3, NULL, now() - interval '1 minute', '{"n": "x3"}');
CREATE FUNCTION pg_temp.key_pages_read(n int, OUT claimed text, OUT bounded bool)
LANGUAGE plpgsql AS $$
DECLARE
	v_before bigint := pg_stat_get_xact_blocks_fetched('bgexec.job_runnable_key_idx'::regclass);
BEGIN
	SELECT string_agg(c.payload->>'n', ',' ORDER BY ord) INTO claimed
	  FROM bgexec.claim('wf', '{futk}', n) WITH ORDINALITY c(job_id, lease, queue, kind, owner, payload,
	       attempt, max_attempts, deadline, lease_expires_at, completed_steps, completed_stdout, started_seq, ord);
	bounded := pg_stat_get_xact_blocks_fetched('bgexec.job_runnable_key_idx'::regclass) - v_before < 80;
END $$;
-- b's priority 5 (b then at its cap), the keyless ones in claim order;
-- then nothing (b at its cap, hot at its cap, the rest not due)
SELECT * FROM pg_temp.key_pages_read(10);
SELECT * FROM pg_temp.key_pages_read(10);
SELECT concurrency_key, count(*) FROM bgexec.job WHERE queue = 'futk' AND status = 'running'
 GROUP BY 1 ORDER BY 1 NULLS LAST;
ROLLBACK;
-- Within a priority the claim takes the earliest due jobs (run_after, then
-- id), and goes on to the next priority down, adjacent or not, on each
-- path, where a priority holds more due jobs than the claim reads of it
-- (max_jobs on the fast path, the window on the capped one, a key's free
-- slots and max_jobs for the keyless ones on the key-by-key path).  Ids
-- are in the opposite order of run_after: a range read in id order, or a
-- recursion that skipped priority p - 1, claimed other jobs.
BEGIN;
SELECT (bgexec.configure_queue('ordc', max_running => 1000)).name;
SELECT (bgexec.configure_queue('ordk', max_running_per_key => 2)).name;
CREATE FUNCTION pg_temp.claimed(q text, n int) RETURNS text
LANGUAGE sql AS $$
	SELECT string_agg(c.payload->>'n', ',' ORDER BY ord)
	  FROM bgexec.claim('wf', ARRAY[q], n) WITH ORDINALITY c(job_id, lease, queue, kind, owner, payload,
	       attempt, max_attempts, deadline, lease_expires_at, completed_steps, completed_stdout, started_seq, ord)
$$;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after, payload)
VALUES ('ordq', 'noop', current_user, 0, now() - interval '1 minute', '{"n": "late"}'),
       ('ordq', 'noop', current_user, 0, now() - interval '2 minutes', '{"n": "early"}'),
       ('ordq', 'noop', current_user, 1, now() - interval '1 second', '{"n": "p1"}');
-- the capped queue: 105 due jobs of priority 0, one more than the window
-- of a claim of 1 (104): the earliest is the last written; and a due job
-- of priority 1
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after, payload)
SELECT 'ordc', 'noop', current_user, 0, now() - n * interval '1 second', jsonb_build_object('n', n::text)
  FROM generate_series(1, 105) n ORDER BY n;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after, payload)
VALUES ('ordc', 'noop', current_user, 1, now() - interval '1 second', '{"n": "p1"}');
-- the key-by-key queue: its key "hot" at its cap (2 running) with more
-- queued than the window of a claim of 4 (116); key c and the keyless jobs
-- at priorities 1 and 0
INSERT INTO bgexec.job (queue, kind, owner, priority, concurrency_key, run_after, payload)
SELECT 'ordk', 'noop', current_user, 0, 'hot', now() - interval '1 hour', '{"n": "hot"}'
  FROM generate_series(1, 2);
SELECT pg_temp.claimed('ordk', 2) AS running;
INSERT INTO bgexec.job (queue, kind, owner, priority, concurrency_key, run_after, payload)
SELECT 'ordk', 'noop', current_user, 0, 'hot', now() - interval '1 hour', '{"n": "hot"}'
  FROM generate_series(1, 120);
INSERT INTO bgexec.job (queue, kind, owner, priority, concurrency_key, run_after, payload)
VALUES ('ordk', 'noop', current_user, 1, 'c', now() - interval '10 minutes', '{"n": "c1"}'),
       ('ordk', 'noop', current_user, 0, 'c', now() - interval '1 minute', '{"n": "c-late"}'),
       ('ordk', 'noop', current_user, 0, 'c', now() - interval '4 minutes', '{"n": "c-early"}'),
       ('ordk', 'noop', current_user, 1, NULL, now() - interval '5 minutes', '{"n": "x1"}'),
       ('ordk', 'noop', current_user, 0, NULL, now() - interval '2 minutes', '{"n": "x-late"}'),
       ('ordk', 'noop', current_user, 0, NULL, now() - interval '3 minutes', '{"n": "x-early"}');
-- a claim of 1 at a time, up to 6: p1, early, late (fast); p1, 105, 104,
-- ... (capped); c1, x1, c-early, x-early, x-late (key by key; c-late
-- stays queued, c at its cap)
CREATE FUNCTION pg_temp.claimed_each(q text, times int) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	v_all text[] := '{}';
	v_one text;
BEGIN
	FOR i IN 1..times LOOP
		v_one := pg_temp.claimed(q, 1);
		EXIT WHEN v_one IS NULL;
		v_all := v_all || v_one;
	END LOOP;
	RETURN array_to_string(v_all, ',');
END $$;
SELECT q, pg_temp.claimed_each(q, 6) FROM unnest('{ordq,ordc,ordk}'::text[]) q ORDER BY q;
-- adjacent priorities, both taken by one claim: 1 then 0 on each path
-- (key d and the keyless ones on the key-by-key queue, c and hot at their cap)
SELECT (bgexec.configure_queue('adjc', max_running => 1000)).name;
INSERT INTO bgexec.job (queue, kind, owner, priority, concurrency_key, run_after, payload)
SELECT q, 'noop', current_user, p, k, now() - interval '1 minute' - (k IS NULL)::int * interval '1 minute',
       jsonb_build_object('n', coalesce(k, 'x') || p)
  FROM (VALUES ('adjq', 'q'), ('adjc', 'c'), ('ordk', 'd'), ('ordk', NULL)) v(q, k), generate_series(0, 1) p;
SELECT q, pg_temp.claimed(q, 4) FROM unnest('{adjq,adjc,ordk}'::text[]) q ORDER BY q;
ROLLBACK;
-- The LIMIT stops the recursion on each path: a claim that found what it
-- takes at its highest priority does not descend through the priorities
-- below it (300 here, future jobs on the fast and capped paths, due ones
-- of key b and keyless ones on the key-by-key path: a descent or two
-- each, some 600 index pages read for nothing).
BEGIN;
SELECT (bgexec.configure_queue('manyc', max_running => 10000)).name;
SELECT (bgexec.configure_queue('manyk', max_running_per_key => 1)).name;
-- (claimed as above: the first transaction's function is gone)
CREATE FUNCTION pg_temp.claimed(q text, n int) RETURNS text
LANGUAGE sql AS $$
	SELECT string_agg(c.payload->>'n', ',' ORDER BY ord)
	  FROM bgexec.claim('wf', ARRAY[q], n) WITH ORDINALITY c(job_id, lease, queue, kind, owner, payload,
	       attempt, max_attempts, deadline, lease_expires_at, completed_steps, completed_stdout, started_seq, ord)
$$;
-- due at priority 1000: 2 (fast), 105 (capped: the window of a claim of 1 is 104)
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after, payload)
SELECT q, 'noop', current_user, 1000, now() - interval '1 minute', '{"n": "top"}'
  FROM (VALUES ('manyq', 2), ('manyc', 105)) v(q, n), generate_series(1, v.n);
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after)
SELECT q, 'noop', current_user, p, now() + interval '1 day'
  FROM unnest('{manyq,manyc}'::text[]) q, generate_series(0, 299) p;
-- key hot at its cap, with more queued than the window; b's and the
-- keyless jobs due at each of 300 priorities
INSERT INTO bgexec.job (queue, kind, owner, priority, concurrency_key, run_after, payload)
VALUES ('manyk', 'noop', current_user, 0, 'hot', now() - interval '1 hour', '{"n": "hot"}');
SELECT pg_temp.claimed('manyk', 1) AS running;
INSERT INTO bgexec.job (queue, kind, owner, priority, concurrency_key, run_after, payload)
SELECT 'manyk', 'noop', current_user, 0, 'hot', now() - interval '1 hour', '{"n": "hot"}'
  FROM generate_series(1, 105);
INSERT INTO bgexec.job (queue, kind, owner, priority, concurrency_key, run_after, payload)
SELECT 'manyk', 'noop', current_user, p, k, now() - interval '1 minute' - p * interval '1 second',
       jsonb_build_object('n', coalesce(k, 'x') || p)
  FROM generate_series(0, 299) p, (VALUES ('b'), (NULL)) v(k);
CREATE FUNCTION pg_temp.blocks_read(q text, idx regclass, OUT claimed text, OUT bounded bool)
LANGUAGE plpgsql AS $$
DECLARE
	v_before bigint := pg_stat_get_xact_blocks_fetched(idx);
BEGIN
	claimed := pg_temp.claimed(q, 1);
	bounded := pg_stat_get_xact_blocks_fetched(idx) - v_before < 80;
END $$;
SELECT q, r.* FROM (VALUES ('manyq', 'bgexec.job_runnable_idx'::regclass),
                           ('manyc', 'bgexec.job_runnable_idx'),
                           ('manyk', 'bgexec.job_runnable_key_idx')) v(q, idx),
       pg_temp.blocks_read(v.q, v.idx) r ORDER BY q;
ROLLBACK;

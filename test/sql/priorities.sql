-- priorities: queued jobs at many distinct priorities, most of them only
-- on jobs not yet due, cost a claim nothing each (review F5).  The claim
-- walked the queue's priorities from the highest down, one index descent
-- to find each and one to read its due jobs, future-only ones too: 20 000
-- jobs due tomorrow, each at its own priority, made every claim of the
-- queue ~10x slower (208-386 ms).  Past its eighth priority the walk now
-- steps from each priority straight to the next one with a due job: a
-- descent, then the future jobs between passed over inside the index
-- pages (some 150 entries a page).
\set SHOW_CONTEXT never
-- The payloads' "n" a claim took, in claim order; and the index pages
-- (job_runnable_idx) it read, bounded by max_pages.
CREATE FUNCTION pg_temp.claimed(qs text[], n int) RETURNS text
LANGUAGE sql AS $$
	SELECT string_agg(c.payload->>'n', ',' ORDER BY ord)
	  FROM bgexec.claim('wp', qs, n) WITH ORDINALITY c(job_id, lease, queue, kind, owner, payload,
	       attempt, max_attempts, deadline, lease_expires_at, completed_steps, completed_stdout, started_seq, ord)
$$;
CREATE FUNCTION pg_temp.idx_pages() RETURNS bigint LANGUAGE sql AS $$
	SELECT pg_stat_get_xact_blocks_fetched('bgexec.job_runnable_idx'::regclass) $$;
CREATE FUNCTION pg_temp.pages_read(qs text[], n int, max_pages int, OUT claimed text, OUT bounded bool)
LANGUAGE plpgsql AS $$
DECLARE
	v_before bigint := pg_temp.idx_pages();
BEGIN
	claimed := pg_temp.claimed(qs, n);
	bounded := pg_temp.idx_pages() - v_before < max_pages;
END $$;
BEGIN;
SELECT (bgexec.configure_queue('fpc', max_running => 1000)).name;
-- 3 000 jobs due in a day, each at its own priority (1-3000), in an
-- uncapped and a capped queue (written directly: submit_many takes
-- seconds for as many)
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after)
SELECT q, 'noop', current_user, p, now() + interval '1 day'
  FROM generate_series(1, 3000) p, unnest('{fpq,fpc}'::text[]) q;
-- due ones among them: a priority with a due and a future job (2000), a
-- due job alone at its priority (1500, -5), and two at priority 0 in a
-- mixed order of run_after
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after, payload)
SELECT q, 'noop', current_user, p, now() + ra, jsonb_build_object('n', n)
  FROM (VALUES ('p2000', 2000, '-1 second'::interval), ('p1500', 1500, '-1 minute'),
               ('p0-late', 0, '-1 minute'), ('p0-early', 0, '-2 minutes'),
               ('pm5', -5, '-3 minutes')) v(n, p, ra),
       unnest('{fpq,fpc}'::text[]) q;
-- Index pages a claim reads (job_runnable_idx): the old walk read two
-- descents for each of the 3 000 priorities (some 12 000 pages); now
-- eight priorities' descents and a step over the 3 000 future jobs.
-- in claim order (priority, then run_after), bounded, on the fast path,
-- the capped one, and over two queues (the unlocked read first): two at a
-- time, then what is left, then nothing
SELECT q, r.* FROM unnest('{fpq,fpc}'::text[]) q, pg_temp.pages_read(ARRAY[q], 2, 250) r;
SELECT q, r.* FROM unnest('{fpq,fpc}'::text[]) q, pg_temp.pages_read(ARRAY[q], 10, 250) r;
SELECT q, r.* FROM unnest('{fpq,fpc}'::text[]) q, pg_temp.pages_read(ARRAY[q], 10, 250) r;
ROLLBACK;
BEGIN;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after)
SELECT q, 'noop', current_user, p, now() + interval '1 day'
  FROM generate_series(1, 3000) p, unnest('{fpa,fpb}'::text[]) q;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after, payload)
VALUES ('fpa', 'noop', current_user, 10, now() - interval '1 minute', '{"n": "a10"}'),
       ('fpb', 'noop', current_user, 20, now() - interval '1 minute', '{"n": "b20"}'),
       ('fpb', 'noop', current_user, 0, now() - interval '1 minute', '{"n": "b0"}');
-- b20, a10, b0 over both queues (and nothing more); the old walk read
-- some 72 000 pages
SELECT * FROM pg_temp.pages_read('{fpa,fpb}', 10, 1000);
SELECT * FROM pg_temp.pages_read('{fpa,fpb}', 10, 1000);
ROLLBACK;
-- A backlog of due jobs below the future ones, and one due job among
-- them (the old walk read two descents a priority, some 12 000 pages).
BEGIN;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after)
SELECT 'fpl', 'noop', current_user, p, now() + interval '1 day' FROM generate_series(1, 3000) p;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after, payload)
SELECT 'fpl', 'noop', current_user, 0, now() - i * interval '1 second', jsonb_build_object('n', 'z' || i)
  FROM generate_series(1, 1100) i ORDER BY i;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after, payload)
VALUES ('fpl', 'noop', current_user, 1234, now() - interval '1 second', '{"n": "p1234"}');
SELECT * FROM pg_temp.pages_read('{fpl}', 3, 250);
SELECT * FROM pg_temp.pages_read('{fpl}', 2, 250);
ROLLBACK;
-- A large backlog of future jobs at a priority past the eighth: 50 000
-- due tomorrow at priority 0, below twelve future-only priorities, and one
-- due job below them.  A step over every future job (the index condition
-- "run_after <= now()") read some 300 pages a claim (200 000: 18-31 ms
-- where the walk's descent took 0.25); a batch of 256 entries finds that
-- priority 0's first job is in the future, and the next starts below it.
BEGIN;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after)
SELECT 'fpf', 'noop', current_user, p, now() + interval '1 day' FROM generate_series(100, 111) p;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after)
SELECT 'fpf', 'noop', current_user, 0, now() + interval '1 day' + i * interval '1 ms'
  FROM generate_series(1, 50000) i;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after, payload)
VALUES ('fpf', 'noop', current_user, -1, now() - interval '1 second', '{"n": "m1"}');
SELECT * FROM pg_temp.pages_read('{fpf}', 2, 150);
SELECT * FROM pg_temp.pages_read('{fpf}', 2, 150);
ROLLBACK;
-- The order where the claim reads past the eighth priority, on the fast
-- and the capped path, with 1 000 and 1 001 due jobs.  Twelve priorities
-- 100-111 of one due job each, run_after later as the priority is higher;
-- below them priority 50 and 0 jobs, run_after opposite to id order, and
-- future jobs at each priority in between.
BEGIN;
SELECT (bgexec.configure_queue('wc' || n, max_running => 5000)).name FROM generate_series(1000, 1001) n;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after, payload)
SELECT q || n, 'noop', current_user, p, now() - interval '1 hour' + p * interval '1 second', jsonb_build_object('n', 'p' || p)
  FROM generate_series(100, 111) p, generate_series(1000, 1001) n, unnest('{w,wc}'::text[]) q;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after)
SELECT q || n, 'noop', current_user, p, now() + interval '1 day'
  FROM generate_series(1, 99) p, generate_series(1000, 1001) n, unnest('{w,wc}'::text[]) q;
-- below the eighth priority (104): the twelve's last four, then at 50
-- "x50" and "y50" (y due first), and the rest at 0
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after, payload)
SELECT q || n, 'noop', current_user, 50, now() - v.ra, jsonb_build_object('n', v.nm)
  FROM (VALUES ('x50', interval '1 minute'), ('y50', interval '2 minutes')) v(nm, ra),
       generate_series(1000, 1001) n, unnest('{w,wc}'::text[]) q;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after, payload)
SELECT q || n, 'noop', current_user, 0, now() - i * interval '1 second', jsonb_build_object('n', 'z' || i)
  FROM generate_series(1000, 1001) n, unnest('{w,wc}'::text[]) q, generate_series(1, n - 14) i
 ORDER BY i;
-- due: 1 000 and 1 001; 15 claimed, in order
SELECT q || n AS queue, count(*) FILTER (WHERE run_after <= now()) AS due,
       pg_temp.claimed(ARRAY[q || n], 15)
  FROM generate_series(1000, 1001) n, unnest('{w,wc}'::text[]) q, bgexec.job j
 WHERE j.queue = q || n AND j.status = 'queued'
 GROUP BY q, n ORDER BY 1;
ROLLBACK;
-- the first batch's boundary (a mutation test: a first batch of 255, or
-- the next read from entry 257, passed over a due job there and claimed a
-- lower priority first): past the walk's eight future-only priorities,
-- a due job at entry 256 (fb256) and at entry 257 (fb257) of _next_due's
-- read is claimed before the one at priority 10; and a job due at the
-- very time asked is due (run_after <= at)
BEGIN;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after)
SELECT q, 'noop', current_user, p, now() + interval '1 day'
  FROM unnest('{fb256,fb257}'::text[]) q, generate_series(300, 307) p;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after)
SELECT 'fb256', 'noop', current_user, p, now() + interval '1 day' FROM generate_series(45, 299) p;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after)
SELECT 'fb257', 'noop', current_user, p, now() + interval '1 day' FROM generate_series(44, 299) p;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after, payload) VALUES
 ('fb256', 'noop', current_user, 44, now() - interval '1 second', '{"n": "at256"}'),
 ('fb256', 'noop', current_user, 10, now() - interval '1 second', '{"n": "low"}'),
 ('fb257', 'noop', current_user, 43, now() - interval '1 second', '{"n": "at257"}'),
 ('fb257', 'noop', current_user, 10, now() - interval '1 second', '{"n": "low"}');
SELECT q, (SELECT string_agg(c.payload->>'n', ',') FROM bgexec.claim('wp', ARRAY[q], 1) c) AS claimed
  FROM unnest('{fb256,fb257}'::text[]) q;
SELECT q, bgexec._next_due(q, 300, (SELECT min(run_after) FROM bgexec.job WHERE queue = q AND run_after < now())) AS next_due
  FROM unnest('{fb256,fb257}'::text[]) q;
ROLLBACK;

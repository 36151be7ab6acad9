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

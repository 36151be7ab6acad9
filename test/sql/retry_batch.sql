-- retry_batch: bgexec._retry_batch, one batch of retry of many (`bgexec
-- retry --queue Q`, POST /v1/jobs/retry) -- the caller's jobs (row-level
-- security), the oldest after an id, and with a queue read through
-- job_ended_badly_idx (queue, id): as one statement the planner walked
-- job_ended_badly_id_idx and filtered every queue's jobs that ended badly
-- when the queue had few or none.
\set SHOW_CONTEXT never
SET synchronous_commit = off;
CREATE ROLE regress_rb_alice IN ROLE bgexec_client;
CREATE ROLE regress_rb_bob IN ROLE bgexec_client;
-- alice's five failed jobs in rb-03, then 40 000 of bob's over rb-00 to
-- rb-19 in turn: seven in ten completed, two failed, one cancelled or timed
-- out, each queue one status of them (rb-03 completed, rb-07 failed, rb-09
-- cancelled, rb-19 timed out).  The planner, taking queue and status as
-- independent, expects hundreds of rb-03's to have ended badly, and finds
-- the (id) index, in the table's order, cheaper to read than (queue, id).
INSERT INTO bgexec.job (queue, kind, owner, status, payload, error, attempt, max_attempts,
                        run_after, created_at, started_at, finished_at, last_seq)
SELECT 'rb-03', 'k' || (g % 2), 'regress_rb_alice', 'failed', '{}', '{"message":"x"}', 1, 1,
       now(), now(), now(), now(), 1
  FROM generate_series(1, 5) g;
INSERT INTO bgexec.job (queue, kind, owner, status, payload, result, error, attempt, max_attempts,
                        run_after, created_at, started_at, finished_at, last_seq)
SELECT 'rb-' || lpad((g % 20)::text, 2, '0'), 'k' || (g % 3), 'regress_rb_bob', st, '{}',
       CASE WHEN st = 'completed' THEN '{}'::jsonb END, CASE WHEN st <> 'completed' THEN '{"message":"x"}'::jsonb END,
       1, 1, now(), now(), now(), now(), 1
  FROM (SELECT g, (CASE WHEN g % 10 < 7 THEN 'completed' WHEN g % 10 < 9 THEN 'failed'
                        WHEN g % 20 = 9 THEN 'cancelled' ELSE 'timed_out' END)::bgexec.job_status AS st
          FROM generate_series(1, 40000) g) s;
ANALYZE bgexec.job;
-- heap rows read so far, and scans of the two indexes of the jobs that
-- ended badly: flushed at the end of the statement before, read in the next
CREATE FUNCTION reads() RETURNS TABLE (rows bigint, by_queue bigint, by_id bigint) LANGUAGE sql AS $$
	SELECT coalesce(t.seq_tup_read, 0) + coalesce(t.idx_tup_fetch, 0),
	       (SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelid = 'bgexec.job_ended_badly_idx'::regclass),
	       (SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelid = 'bgexec.job_ended_badly_id_idx'::regclass)
	  FROM pg_stat_user_tables t WHERE t.relid = 'bgexec.job'::regclass
$$;
CREATE TABLE rb_r0 AS SELECT * FROM reads();
-- the rows read since (a few: the batch's own), and the scans of each index
CREATE FUNCTION since() RETURNS TABLE (few_rows_read boolean, by_queue bigint, by_id bigint) LANGUAGE sql AS $$
	SELECT n.rows - o.rows <= 20, n.by_queue - o.by_queue, n.by_id - o.by_id FROM reads() n, rb_r0 o
$$;
CREATE FUNCTION mark() RETURNS void LANGUAGE sql AS $$
	DELETE FROM rb_r0; INSERT INTO rb_r0 SELECT * FROM reads()
$$;
-- a superuser: rb-03's five failed jobs (every role's) through (queue, id),
-- not a walk of bob's 12 000 that ended badly by id
SELECT pg_stat_force_next_flush();
SELECT mark();
SELECT count(*) AS n FROM bgexec._retry_batch('rb-03', NULL, '{failed,timed_out}', 0, 500);
SELECT pg_stat_force_next_flush();
SELECT * FROM since();
SELECT array_agg(DISTINCT owner) AS owners FROM bgexec.job
 WHERE id IN (SELECT job_id FROM bgexec._retry_batch('rb-03', NULL, '{failed,timed_out}', 0, 500));
SELECT pg_stat_force_next_flush();
-- none cancelled in rb-03, none in a queue that has no job
SELECT mark();
SELECT count(*) AS n FROM bgexec._retry_batch('rb-03', NULL, '{cancelled}', 0, 500);
SELECT pg_stat_force_next_flush();
SELECT * FROM since();
SELECT mark();
SELECT count(*) AS n FROM bgexec._retry_batch('rb-x', NULL, '{failed,cancelled,timed_out}', 0, 500);
SELECT pg_stat_force_next_flush();
SELECT * FROM since();
-- a client (row-level security): its own jobs alone, read as few
SELECT mark();
SET ROLE regress_rb_alice;
SELECT count(*) AS n FROM bgexec._retry_batch('rb-03', NULL, '{failed,timed_out}', 0, 500);
RESET ROLE;
SELECT pg_stat_force_next_flush();
SELECT * FROM since();
SELECT mark();
SET ROLE regress_rb_alice;
SELECT count(*) AS n FROM bgexec._retry_batch('rb-03', NULL, '{cancelled}', 0, 500);
RESET ROLE;
SELECT pg_stat_force_next_flush();
SELECT * FROM since();
SELECT mark();
SET ROLE regress_rb_bob;
SELECT count(*) AS n FROM bgexec._retry_batch('rb-03', NULL, '{failed,timed_out}', 0, 500);
RESET ROLE;
SELECT pg_stat_force_next_flush();
SELECT * FROM since();
SET ROLE regress_rb_alice;
SELECT count(*) AS none_of_bobs FROM bgexec._retry_batch('rb-07', NULL, '{failed}', 0, 500);
SELECT count(*) AS all_hers FROM bgexec._retry_batch(NULL, NULL, '{failed,cancelled,timed_out}', 0, 500);
RESET ROLE;
-- the jobs of a batch: the oldest lim after after, as the table's order,
-- of a queue or not, a kind or not, one status or several; as a superuser
-- and as bob (row-level security)
CREATE FUNCTION batches_match() RETURNS TABLE (batches bigint, batches_match bigint) LANGUAGE sql AS $$
	SELECT count(*), count(*) FILTER (WHERE got = want) FROM (
		SELECT array(SELECT job_id FROM bgexec._retry_batch(q, k, st, a, l)) AS got,
		       array(SELECT j.id FROM bgexec.job j
		              WHERE j.status = ANY (st) AND (k IS NULL OR j.kind = k)
		                AND (q IS NULL OR j.queue = q) AND j.id > a
		              ORDER BY j.id LIMIT l) AS want
		  FROM (SELECT min(id) AS lo FROM bgexec.job WHERE owner = 'regress_rb_bob') m,
		       LATERAL (VALUES (NULL::text, NULL::text, '{failed,timed_out}'::bgexec.job_status[]),
		                       (NULL, 'k1', '{cancelled}'), ('rb-07', NULL, '{failed}'),
		                       ('rb-07', NULL, '{failed,cancelled,timed_out}'), ('rb-03', NULL, '{failed,timed_out}'),
		                       ('rb-09', 'k0', '{cancelled,failed}'), ('rb-19', NULL, '{cancelled}'),
		                       ('rb-19', 'k1', '{timed_out,timed_out}'), ('rb-08', 'k2', '{failed,cancelled,timed_out}')) f(q, k, st),
		       LATERAL (SELECT lo + o AS a FROM generate_series(-10, 40000, 3999) o) af,
		       LATERAL (VALUES (1), (7), (500)) lf(l)) x
$$;
GRANT EXECUTE ON FUNCTION batches_match() TO PUBLIC;
SELECT * FROM batches_match();
SET ROLE regress_rb_bob;
SELECT * FROM batches_match();
RESET ROLE;
-- after null: from the oldest; no status: none
SELECT count(*) AS from_the_oldest FROM bgexec._retry_batch('rb-03', NULL, '{failed}', NULL, 10);
SELECT count(*) AS no_status FROM bgexec._retry_batch('rb-07', NULL, '{}', 0, 10);
-- lim out of range, a status that did not end badly: 22023
SELECT * FROM try($$SELECT * FROM bgexec._retry_batch('rb-07', NULL, '{failed}', 0, 0)$$);
SELECT * FROM try($$SELECT * FROM bgexec._retry_batch('rb-07', NULL, '{failed}', 0, 1001)$$);
SELECT * FROM try($$SELECT * FROM bgexec._retry_batch('rb-07', NULL, '{failed}', 0, NULL)$$);
SELECT * FROM try($$SELECT * FROM bgexec._retry_batch('rb-07', NULL, '{failed,queued}', 0, 10)$$);
SELECT * FROM try($$SELECT * FROM bgexec._retry_batch('rb-07', NULL, '{failed,NULL}', 0, 10)$$);
SELECT * FROM try($$SELECT * FROM bgexec._retry_batch('rb-03', NULL, '{completed}', 0, 10)$$);
-- sorting is back on after it, in the caller's transaction too
SHOW enable_sort;
BEGIN;
SELECT count(*) FROM bgexec._retry_batch('rb-07', NULL, '{failed}', 0, 10);
SHOW enable_sort;
COMMIT;
-- and a role that is not a client may not call it
CREATE ROLE regress_rb_other;
SET ROLE regress_rb_other;
SELECT * FROM try($$SELECT * FROM bgexec._retry_batch('rb-07', NULL, '{failed}', 0, 1)$$);
RESET ROLE;
DROP ROLE regress_rb_other;
DROP FUNCTION batches_match(), since(), mark(), reads();
DROP TABLE rb_r0;
DELETE FROM bgexec.job WHERE queue LIKE 'rb-%';
SELECT bgexec._recount() >= 0 AS recounted;
DROP ROLE regress_rb_alice, regress_rb_bob;

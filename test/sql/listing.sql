-- listing: bgexec._list_jobs (`bgexec jobs`, GET /v1/jobs) -- a tenant sees
-- its own jobs, a superuser every role's, and a page reads the jobs of its
-- status or queue, not the table (under row-level security "status =
-- ANY(...)" was no index condition: a tenant's queued jobs were found by
-- walking every owner's jobs).
\set SHOW_CONTEXT never
SET synchronous_commit = off;
CREATE ROLE regress_lst_alice IN ROLE bgexec_client;
CREATE ROLE regress_lst_bob IN ROLE bgexec_client;
-- 40 000 newer jobs of bob's (failed in lst-a, completed in lst-b), after alice's
-- few, older: failed in lst-b, queued in lst-q (the planner, taking queue and
-- status as independent, expects a thousand failed jobs in lst-b)
INSERT INTO bgexec.job (queue, kind, owner, status, payload, result, error, attempt, max_attempts,
                        run_after, created_at, started_at, finished_at, last_seq)
SELECT 'lst-b', 'k', 'regress_lst_alice', 'failed', '{}', NULL, '{"message":"x"}', 1, 1,
       now(), now(), now(), now(), 1
  FROM generate_series(1, 5);
INSERT INTO bgexec.job (queue, kind, owner, status, payload, run_after, created_at)
SELECT 'lst-q', 'k', 'regress_lst_alice', 'queued', '{}', now() + interval '1 day', now()
  FROM generate_series(1, 3);
INSERT INTO bgexec.job (queue, kind, owner, status, payload, result, error, attempt, max_attempts,
                        run_after, created_at, started_at, finished_at, last_seq)
SELECT CASE WHEN g % 4 = 0 THEN 'lst-a' ELSE 'lst-b' END, 'k', 'regress_lst_bob',
       CASE WHEN g % 4 = 0 THEN 'failed' ELSE 'completed' END::bgexec.job_status, '{}',
       CASE WHEN g % 4 <> 0 THEN '{}'::jsonb END, CASE WHEN g % 4 = 0 THEN '{"message":"x"}'::jsonb END,
       1, 1, now(), now(), now(), now(), 1
  FROM generate_series(1, 40000) g;
ANALYZE bgexec.job;
-- heap rows of bgexec.job this transaction read so far, sequentially or
-- through an index (pg_stat_user_tables' seq_tup_read + idx_tup_fetch)
CREATE FUNCTION rows_read() RETURNS bigint LANGUAGE sql AS $$
	SELECT pg_stat_get_xact_tuples_returned('bgexec.job'::regclass)
	       + pg_stat_get_xact_tuples_fetched('bgexec.job'::regclass)
	       + (SELECT coalesce(sum(pg_stat_get_xact_tuples_fetched(i.indexrelid)), 0)::bigint
	            FROM pg_index i WHERE i.indrelid = 'bgexec.job'::regclass)
$$;
-- one page of 51 as a role (NULL: the superuser): its jobs, their owners,
-- and whether it read at most 4 100 heap rows
CREATE FUNCTION page(who name, q text, st bgexec.job_status[])
	RETURNS TABLE (n bigint, owners bigint, few_rows_read boolean) LANGUAGE plpgsql AS $$
DECLARE
	r0 bigint := rows_read();
BEGIN
	IF who IS NOT NULL THEN EXECUTE format('SET ROLE %I', who); END IF;
	SELECT count(*), count(DISTINCT l.owner) INTO n, owners FROM bgexec._list_jobs(q, st, NULL, 51, NULL) l;
	RESET ROLE;
	few_rows_read := rows_read() - r0 <= 4100;
	RETURN NEXT;
END $$;
-- alice's queued and suspended jobs: through their partial indexes, not a
-- walk of bob's 40 000
SELECT * FROM page('regress_lst_alice', NULL, '{queued}');
SELECT * FROM page('regress_lst_alice', NULL, '{suspended}');
SELECT * FROM page('regress_lst_alice', NULL, '{queued,suspended}');
-- a queue's failed jobs: through job_ended_badly_idx (queue, id), not the
-- walk of every queue's by id (bob's 10 000 failed ones; the newest 2 000 jobs are read first)
SELECT * FROM page('regress_lst_alice', 'lst-b', '{failed}');
SELECT * FROM page('regress_lst_alice', 'lst-b', '{failed,cancelled,timed_out}');
SELECT * FROM page('regress_lst_alice', 'lst-x', '{failed}');
SET ROLE regress_lst_alice;
-- her own jobs alone, whatever the filter
SELECT count(*), min(owner), max(owner) FROM bgexec._list_jobs(NULL, NULL, NULL, 1000, NULL);
SELECT count(*) FROM bgexec._list_jobs('lst-a', NULL, NULL, 1000, NULL);
SELECT count(*) FROM bgexec._list_jobs(NULL, '{completed}', NULL, 1000, 'k');
RESET ROLE;
-- a superuser: every role's; the queue's failed jobs read alone too
SELECT * FROM page(NULL, 'lst-b', '{failed}');
SELECT * FROM page(NULL, 'lst-a', '{failed}');
SELECT min(id) + 5 AS bob_first FROM bgexec.job WHERE owner = 'regress_lst_bob' \gset
SELECT count(*) FILTER (WHERE owner = 'regress_lst_alice') AS alice, count(*) FILTER (WHERE owner = 'regress_lst_bob') AS bob
  FROM bgexec._list_jobs(NULL, NULL, :bob_first, 1000, NULL);
-- newest first, paged by id as before: the same jobs as the table's order,
-- from the newest 2 000 and from the older ones (alice's are the oldest)
SELECT count(*) AS pages, count(*) FILTER (WHERE got = want) AS pages_match FROM (
	SELECT b, array(SELECT id FROM bgexec._list_jobs(q, st, b, 7, k) ORDER BY id DESC) AS got,
	       array(SELECT id FROM bgexec.job j
	              WHERE (st IS NULL OR j.status = ANY (st)) AND (k IS NULL OR j.kind = k)
	                AND (q IS NULL OR j.queue = q) AND j.id < b
	              ORDER BY id DESC LIMIT 7) AS want
	  FROM (SELECT max(id) + 1 AS top FROM bgexec.job) t,
	       LATERAL (VALUES (NULL::text, NULL::bgexec.job_status[], NULL::text), (NULL, '{failed}', NULL),
	                       (NULL, '{queued,failed}', 'k'), (NULL, '{completed}', 'k'), (NULL, '{queued}', NULL),
	                       (NULL, '{queued,completed,failed}', NULL), ('lst-b', '{failed}', NULL),
	                       ('lst-b', '{failed,completed}', NULL), ('lst-q', NULL, NULL)) f(q, st, k),
	       LATERAL (SELECT top - o AS b FROM generate_series(0, 40000, 1999) o) bs) x;
-- the job just past the newest 2 000 (before before) is the branches' first
SELECT max(id) + 2001 AS past FROM bgexec.job WHERE queue = 'lst-q' \gset
SELECT count(*) AS queued_past_the_walk FROM bgexec._list_jobs('lst-q', '{queued,running}', :past, 10, NULL);
SELECT count(*) AS by_queue FROM bgexec._list_jobs('lst-b', '{failed}', NULL, 3, NULL);
SELECT count(*) AS no_status FROM bgexec._list_jobs(NULL, '{}', NULL, 10, NULL);
SELECT count(*) AS duplicate_status FROM bgexec._list_jobs('lst-b', '{failed,failed}', NULL, 10, NULL);
-- at the edge of the newest 2 000 jobs (the walk's last job bounds the
-- branches): each job once, lim at most, of the kind asked for, whatever
-- the page's before.  Oldest to newest: four queued jobs of lst-e, a failed
-- one, a queued one, 1 998 completed ones of lst-f, a queued one of kind e2.
INSERT INTO bgexec.job (queue, kind, owner, status, payload, run_after, created_at)
SELECT 'lst-e', 'e', 'regress_lst_alice', 'queued', '{}', now() + interval '1 day', now()
  FROM generate_series(1, 4);
INSERT INTO bgexec.job (queue, kind, owner, status, payload, result, error, attempt, max_attempts,
                        run_after, created_at, started_at, finished_at, last_seq)
VALUES ('lst-e', 'e', 'regress_lst_alice', 'failed', '{}', NULL, '{"message":"x"}', 1, 1, now(), now(), now(), now(), 1);
INSERT INTO bgexec.job (queue, kind, owner, status, payload, run_after, created_at)
VALUES ('lst-e', 'e', 'regress_lst_alice', 'queued', '{}', now() + interval '1 day', now());
INSERT INTO bgexec.job (queue, kind, owner, status, payload, result, error, attempt, max_attempts,
                        run_after, created_at, started_at, finished_at, last_seq)
SELECT 'lst-f', 'k', 'regress_lst_bob', 'completed', '{}', '{}', NULL, 1, 1, now(), now(), now(), now(), 1
  FROM generate_series(1, 1998);
INSERT INTO bgexec.job (queue, kind, owner, status, payload, run_after, created_at)
VALUES ('lst-e', 'e2', 'regress_lst_alice', 'queued', '{}', now() + interval '1 day', now());
SELECT max(id) AS e_top FROM bgexec.job WHERE queue = 'lst-e' \gset
SELECT max(id) AS f_top FROM bgexec.job WHERE queue = 'lst-f' \gset
SELECT c.what, cardinality(got) AS n, got = want AS as_the_table FROM (
	SELECT what, array(SELECT id FROM bgexec._list_jobs('lst-e', '{queued,failed}', b, lim, k)) AS got,
	       array(SELECT id FROM bgexec.job j
	              WHERE j.queue = 'lst-e' AND j.status IN ('queued', 'failed') AND (k IS NULL OR j.kind = k)
	                AND (b IS NULL OR j.id < b)
	              ORDER BY id DESC LIMIT lim) AS want
	  FROM (VALUES ('lim, past the walk', NULL, 3, NULL), ('failed at the edge', :e_top, 10, NULL),
	               ('queued at the edge', :f_top, 10, NULL), ('of a kind', NULL, 10, 'e')) f(what, b, lim, k)) c;
-- a role that row-level security passes over reads every role's jobs there
-- too: BYPASSRLS, or a member of the table's owner
CREATE ROLE regress_lst_carol BYPASSRLS IN ROLE bgexec_client;
SELECT format('CREATE ROLE regress_lst_dave IN ROLE bgexec_client, %I', relowner::regrole)
  FROM pg_class WHERE oid = 'bgexec.job'::regclass \gexec
SET ROLE regress_lst_carol;
SELECT count(*) AS carol_sees FROM bgexec._list_jobs('lst-e', NULL, NULL, 1000, NULL);
SET ROLE regress_lst_dave;
SELECT count(*) AS dave_sees FROM bgexec._list_jobs('lst-e', NULL, NULL, 1000, NULL);
RESET ROLE;
DROP ROLE regress_lst_carol, regress_lst_dave;
-- a queue's failed jobs read with sorting off: on again after it, in the
-- caller's transaction
BEGIN;
SELECT count(*) FROM bgexec._list_jobs('lst-b', '{failed}', NULL, 3, NULL);
SHOW enable_sort;
COMMIT;
-- lim out of range: 22023, as purge's max_jobs
\set VERBOSITY sqlstate
SELECT * FROM bgexec._list_jobs(NULL, NULL, NULL, 0, NULL);
SELECT * FROM bgexec._list_jobs(NULL, NULL, NULL, 1001, NULL);
SELECT * FROM bgexec._list_jobs(NULL, NULL, NULL, NULL, NULL);
\set VERBOSITY default
-- and a role that is not a client may not call it
CREATE ROLE regress_lister;
SET ROLE regress_lister;
\set VERBOSITY sqlstate
SELECT * FROM bgexec._list_jobs(NULL, NULL, NULL, 1, NULL);
\set VERBOSITY default
RESET ROLE;
DROP ROLE regress_lister;
DROP FUNCTION page(name, text, bgexec.job_status[]);
DROP FUNCTION rows_read();
DELETE FROM bgexec.job WHERE queue IN ('lst-a', 'lst-b', 'lst-q', 'lst-e', 'lst-f');
SELECT bgexec._recount() >= 0 AS recounted;
DROP ROLE regress_lst_alice, regress_lst_bob;

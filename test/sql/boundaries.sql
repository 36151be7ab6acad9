-- boundaries: each rule at its edge, and behaviour no other suite reached,
-- from a mutation test of the extension (C and SQL): every check here failed
-- on a mutant that all the other suites passed.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
-- submit_limits: submit's bounds at their edges: an idempotency_key of
-- 512 characters is accepted, of 513 refused (22023); a queue name of 63
-- characters accepted, of 64 refused by submit's own check (22023)
SELECT bgexec.submit('noop', queue => 'kslim', idempotency_key => repeat('i', 512)) > 0 AS key_512;
SELECT * FROM try($q$SELECT bgexec.submit('noop', queue => 'kslim', idempotency_key => repeat('i', 513))$q$);
SELECT bgexec.submit('noop', queue => repeat('q', 63)) > 0 AS queue_63;
SELECT * FROM try($q$SELECT bgexec.submit('noop', queue => repeat('q', 64))$q$);
DELETE FROM bgexec.job WHERE queue IN ('kslim', repeat('q', 63));

-- payload_limit: a payload of exactly bgexec.max_payload_bytes is
-- accepted, one byte more refused (54000)
SELECT min(n) AS pn FROM generate_series(1900, 2100) n
 WHERE pg_column_size(jsonb_build_object('x', repeat('a', n))) = 2048 \gset
SET bgexec.max_payload_bytes = 2048;
SELECT bgexec.submit('noop', jsonb_build_object('x', repeat('a', :pn)), queue => 'kpl') > 0 AS at_limit;
SELECT * FROM try(format('SELECT bgexec.submit(%L, %L::jsonb, queue => %L)',
                         'noop', jsonb_build_object('x', repeat('a', :pn + 1)), 'kpl'));
RESET bgexec.max_payload_bytes;
DELETE FROM bgexec.job WHERE queue = 'kpl';

-- workflow_rules: a step naming one step twice in "needs" is refused
-- (22023) by submit
\set VERBOSITY terse
SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 0}, {"id": "b", "needs": ["a", "a"], "sleep": 0}]}');
\set VERBOSITY default

-- cron_step: a step is 1 to the field's largest value: at that value it
-- is accepted, one past it refused (22023), in every field
SELECT e, (try(format('SELECT bgexec._cron_next(%L, %L)', e, '2026-12-01 10:17:30+00'))).*
  FROM unnest(ARRAY['*/60 * * * *', '0 */24 * * *', '0 0 */32 * *', '0 0 1 */13 *', '0 0 * * */8']) e;
SELECT e, bgexec._cron_next(e, '2026-12-01 10:17:30+00') AS next
  FROM unnest(ARRAY['*/59 * * * *', '0 */23 * * *', '0 0 */31 * *', '0 0 1 */12 *', '0 0 * * */7']) e;

-- resume_limit: resume takes an input of exactly bgexec.max_payload_bytes
-- (as the worker reads it), as submit takes such a payload
SELECT bgexec.submit('workflow', '{"steps": [{"id": "gate", "approval": true}]}', queue => 'krl') AS j \gset
SELECT lease AS l FROM bgexec.claim('w', '{krl}', 1) \gset
SELECT bgexec.finish(:j, :l, 'suspended', '{"step": "gate"}');
SELECT min(n) AS pn FROM generate_series(1900, 2100) n
 WHERE bgexec._raw_bytes(jsonb_build_object('x', repeat('a', n))) = 2048 \gset
SET bgexec.max_payload_bytes = 2048;
SELECT * FROM try(format('SELECT bgexec.resume(%s, %L::jsonb)', :j, jsonb_build_object('x', repeat('a', :pn + 1))));
SELECT bgexec.resume(:j, jsonb_build_object('x', repeat('a', :pn))) AS resumed_at_limit;
RESET bgexec.max_payload_bytes;
SELECT status FROM bgexec.job WHERE id = :j;
DELETE FROM bgexec.job WHERE queue = 'krl';

-- resume_order: a resumed job is queued as of its resume: a job submitted
-- while it waited for its approval is claimed before it, and its run_after
-- (what queue_stats' oldest_queued_age counts from) is the resume's time
SELECT bgexec.submit('workflow', '{"steps": [{"id": "gate", "approval": true}]}', queue => 'kro') AS j \gset
SELECT lease AS l FROM bgexec.claim('w', '{kro}', 1) \gset
SELECT bgexec.finish(:j, :l, 'suspended', '{"step": "gate"}');
SELECT bgexec.submit('noop', queue => 'kro') AS other \gset
SELECT bgexec.resume(:j, '{"approved": true}');
SELECT run_after > created_at AS queued_as_of_resume FROM bgexec.job WHERE id = :j;
SELECT job_id = :other AS other_first FROM bgexec.claim('w', '{kro}', 1);
DELETE FROM bgexec.job WHERE queue = 'kro';

-- purge_boundary: purge deletes jobs finished strictly before
-- now() - older_than: with older_than 0, a job finished at now() (in the
-- purging transaction) stays.  A role of its own, so that purge('0')
-- touches no other test's jobs.
CREATE ROLE regress_kpurge IN ROLE bgexec_client;
BEGIN;
SET LOCAL ROLE regress_kpurge;
SELECT bgexec.submit('noop', queue => 'kpb') AS pb \gset
RESET ROLE;
SELECT lease AS pbl FROM bgexec.claim('w', '{kpb}', 1) \gset
SELECT bgexec.finish(:pb, :pbl, 'completed', '{}');
SELECT finished_at = now() AS finished_now FROM bgexec.job WHERE id = :pb;
SET LOCAL ROLE regress_kpurge;
SELECT bgexec.purge('0') AS purged;
RESET ROLE;
COMMIT;
SELECT count(*) AS kept FROM bgexec.job WHERE id = :pb;
DELETE FROM bgexec.job WHERE queue = 'kpb';
DROP ROLE regress_kpurge;

-- counts_table: queue_count holds terminal counts only, and its
-- compaction leaves no row of a count that folded to zero (a queue whose
-- history was purged keeps no rows)
INSERT INTO bgexec.queue_count (queue, status, n)
SELECT 'kct', 'completed', s FROM generate_series(1, 500) i, (VALUES (1), (-1)) d(s);
SELECT bgexec._compact_counts(0) AS compacted;
SELECT count(*) AS kct_rows FROM bgexec.queue_count WHERE queue = 'kct';
-- _recount with a queued and a running job: no rows for them
SELECT bgexec.submit('noop', queue => 'kct') > 0 AS queued;
SELECT bgexec.submit('noop', queue => 'kct') > 0 AS queued;
SELECT count(*) AS claimed FROM bgexec.claim('w', '{kct}', 1);
SELECT bgexec._recount() >= 0 AS recounted;
SELECT count(*) AS non_terminal_rows FROM bgexec.queue_count WHERE NOT bgexec._is_terminal(status);
SELECT * FROM stats_mismatch() WHERE queue = 'kct';
DELETE FROM bgexec.job WHERE queue = 'kct';

-- group_owner: the group role bgexec_worker cannot own a job either
-- (42501, nothing written), where it may submit (granted bgexec_client
-- here; by default it may not call submit at all)
GRANT bgexec_client TO bgexec_worker;
SET ROLE regress_worker;
SET ROLE bgexec_worker;
\set VERBOSITY terse
SELECT bgexec.submit('noop', queue => 'kgo');
\set VERBOSITY default
RESET ROLE;
REVOKE bgexec_client FROM bgexec_worker;
SELECT count(*) AS group_jobs FROM bgexec.job WHERE queue = 'kgo';
DELETE FROM bgexec.job WHERE queue = 'kgo';

-- act_as_twice: a second _act_as in the same transaction, by a role that
-- may call it (a superuser made current by the first), is refused by
-- _act_as itself
\set VERBOSITY terse
BEGIN;
SELECT bgexec._act_as('postgres');
SELECT bgexec._act_as('regress_bob');
ROLLBACK;
\set VERBOSITY default

-- wake_sleepers: wakes that reach a worker asleep in await_work (a second
-- session, dblink): a stop of its job wakes it at once with stop, and a job
-- submitted due before its wait would end wakes it when due, not at the end
-- of the wait.
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT dblink_connect('ks', format('host=%s port=%s dbname=%s user=%s',
              split_part(current_setting('unix_socket_directories'), ',', 1),
              current_setting('port'), current_database(), current_user)) AS connected;
CREATE FUNCTION pg_temp.wait_asleep(w text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..3000 LOOP
		PERFORM pg_stat_clear_snapshot();
		PERFORM FROM pg_stat_activity
		 WHERE query LIKE '%await_work(''' || w || '''%' AND wait_event_type = 'Extension';
		IF FOUND THEN RETURN; END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RAISE EXCEPTION 'the wait did not start';
END $$;
-- stop: the worker holding the job's lease, asleep, returns at once with stop
SELECT bgexec.register_worker('kss', '{kss}', 1);
SELECT bgexec.submit('noop', queue => 'kss') AS ks1 \gset
SELECT count(*) AS claimed FROM bgexec.claim('kss', '{kss}', 1);
SELECT * FROM dblink('ks', $$SELECT jobs, stop FROM bgexec.await_work('kss', '{kss}', 0, '0')$$) AS r(jobs boolean, stop boolean);
SELECT dblink_send_query('ks', $$SELECT jobs, stop FROM bgexec.await_work('kss', '{kss}', 0, '30 s')$$) AS sent;
SELECT pg_temp.wait_asleep('kss');
SELECT clock_timestamp() AS t0 \gset
SELECT bgexec.stop(:ks1);
SELECT * FROM dblink_get_result('ks') AS r(jobs boolean, stop boolean);
SELECT * FROM dblink_get_result('ks') AS r(jobs boolean, stop boolean);
SELECT clock_timestamp() - :'t0' < interval '5 seconds' AS at_once;
-- a job due in a second, submitted while the worker sleeps for 30: it
-- wakes when the job is due
SELECT * FROM dblink('ks', $$SELECT jobs FROM bgexec.await_work('ksl', '{ksl}', 1, '0')$$) AS r(jobs boolean);
SELECT dblink_send_query('ks', $$SELECT jobs FROM bgexec.await_work('ksl', '{ksl}', 1, '30 s')$$) AS sent;
SELECT pg_temp.wait_asleep('ksl');
SELECT bgexec.submit('noop', queue => 'ksl', run_after => clock_timestamp() + interval '1 second') AS kl \gset
SELECT * FROM dblink_get_result('ks') AS r(jobs boolean);
SELECT * FROM dblink_get_result('ks') AS r(jobs boolean);
SELECT clock_timestamp() >= run_after AS due, clock_timestamp() - run_after < interval '5 seconds' AS on_time
  FROM bgexec.job WHERE id = :kl;
SELECT dblink_disconnect('ks');
DROP EXTENSION dblink;
DELETE FROM bgexec.job WHERE queue IN ('kss', 'ksl');
DELETE FROM bgexec.worker WHERE id IN ('kss', 'ksl');
-- result_limit: finish stores a body of exactly bgexec.max_result_bytes
-- (as jsonb); one byte more and the job fails instead (54000, not retried
-- though attempts are left), as the daemon fails one past its
-- --max-result-bytes; finish returns the status it wrote
SELECT min(n) AS rn FROM generate_series(1900, 2100) n
 WHERE bgexec._raw_bytes(jsonb_build_object('x', repeat('a', n))) = 2048 \gset
SET bgexec.max_result_bytes = 2048;
SELECT bgexec.submit('noop', queue => 'krs', max_attempts => 3) AS ja \gset
SELECT bgexec.submit('noop', queue => 'krs', max_attempts => 3) AS jb \gset
SELECT lease AS la FROM bgexec.claim('w', '{krs}', 1) \gset
SELECT lease AS lb FROM bgexec.claim('w', '{krs}', 1) \gset
SELECT bgexec.finish(:ja, :la, 'completed', jsonb_build_object('x', repeat('a', :rn))) AS at_limit;
SELECT bgexec.finish(:jb, :lb, 'completed', jsonb_build_object('x', repeat('a', :rn + 1))) AS over_limit;
SELECT id = :ja AS a, status, result IS NULL AS no_result, error
  FROM bgexec.job WHERE id IN (:ja, :jb) ORDER BY id;
SELECT kind, data FROM bgexec.job_event WHERE job_id = :jb AND kind = 'failed';
-- a failed job's error past it: not stored, the job fails not retried
SELECT bgexec.submit('noop', queue => 'krs', max_attempts => 3) AS jc \gset
SELECT lease AS lc FROM bgexec.claim('w', '{krs}', 1) \gset
SELECT bgexec.finish(:jc, :lc, 'failed', jsonb_build_object('x', repeat('a', :rn + 1))) AS failed_over;
SELECT status, attempt, error->>'outcome' AS sent, error->>'sqlstate' AS sqlstate
  FROM bgexec.job WHERE id = :jc;
-- finish_many: the item past it fails its job, the batch's other item
-- completes; a JSON string body is measured as one too
SELECT bgexec.submit('noop', queue => 'krs') AS jd \gset
SELECT bgexec.submit('noop', queue => 'krs') AS je \gset
SELECT bgexec.submit('noop', queue => 'krs') AS jf \gset
SELECT lease AS ld FROM bgexec.claim('w', '{krs}', 1) \gset
SELECT lease AS le FROM bgexec.claim('w', '{krs}', 1) \gset
SELECT lease AS lf FROM bgexec.claim('w', '{krs}', 1) \gset
SELECT f.job_id = :jd AS d, f.job_id = :je AS e, f.status
  FROM bgexec.finish_many(jsonb_build_array(
         jsonb_build_object('job_id', :jd, 'lease', :ld, 'outcome', 'completed',
                            'body', jsonb_build_object('x', repeat('a', :rn + 1))),
         jsonb_build_object('job_id', :je, 'lease', :le, 'outcome', 'completed',
                            'body', jsonb_build_object('x', repeat('a', :rn))),
         jsonb_build_object('job_id', :jf, 'lease', :lf, 'outcome', 'completed',
                            'body', to_jsonb(repeat('a', 4000))))) f;
SELECT id = :jd AS d, id = :je AS e, status, error->>'result_bytes' AS bytes,
       error->>'max_result_bytes' AS limit, error->>'retryable' AS retryable
  FROM bgexec.job WHERE id IN (:jd, :je, :jf) ORDER BY id;
-- a batch of one item one byte past it: the batch itself is within twice
-- the limit, and its item fails all the same
SELECT bgexec.submit('noop', queue => 'krs', max_attempts => 3) AS jo \gset
SELECT lease AS lo FROM bgexec.claim('w', '{krs}', 1) \gset
SELECT f.status FROM bgexec.finish_many(jsonb_build_array(
         jsonb_build_object('job_id', :jo, 'lease', :lo, 'outcome', 'completed',
                            'body', jsonb_build_object('x', repeat('a', :rn + 1))))) f;
SELECT status, result IS NULL AS no_result, error->>'result_bytes' AS bytes FROM bgexec.job WHERE id = :jo;
-- an item past it with an unknown field is refused as any (22023),
-- nothing changed
SELECT bgexec.submit('noop', queue => 'krs') AS jg \gset
SELECT lease AS lg FROM bgexec.claim('w', '{krs}', 1) \gset
SELECT * FROM try(format('SELECT * FROM bgexec.finish_many(%L)', jsonb_build_array(
         jsonb_build_object('job_id', :jg, 'lease', :lg, 'outcome', 'completed', 'result', 1,
                            'body', jsonb_build_object('x', repeat('a', :rn + 1))))));
SELECT status FROM bgexec.job WHERE id = :jg;
RESET bgexec.max_result_bytes;
DELETE FROM bgexec.job WHERE queue = 'krs';
-- json_prefix: _json_prefix(v, n) is left(v::text, n) for every n up to
-- past the whole text: nested containers, empty ones, escapes, characters
-- of several bytes, numbers as stored, a raw scalar; and a string cut
-- inside (bgexec status reads a few kB of a large value with it)
SELECT count(*) AS values_checked,
       count(*) FILTER (WHERE bad IS NOT NULL) AS mismatches, min(bad) AS first_bad
  FROM (SELECT v, (SELECT min(n) FROM generate_series(0, length(v::text) + 2) n
                    WHERE bgexec._json_prefix(v, n) IS DISTINCT FROM left(v::text, n)) AS bad
          FROM unnest(ARRAY[
                 '{"a": [1, 2.50, {"b": null, "c": [true, false, []]}], "d": {}, "é€😀": "x\"y\\z\n\u0001é"}',
                 '[[], {}, [[1]], "", -0, 1e3, 12345678901234567890.123]',
                 '"a lone string with \"quotes\" and é€😀"', '17', 'null', 'true', '{}', '[]',
                 '[{"k": [{"k": [{"k": "v"}]}]}, 1, "two", [3]]']::jsonb[]) v) t;
SELECT bgexec._json_prefix(to_jsonb(repeat('é', 100000)), 5) AS cut_string,
       bgexec._json_prefix(jsonb_build_object('k', repeat('x', 100000), 'l', 1), 12) AS cut_object;
SELECT * FROM stats_mismatch();

-- retries: failed with attempts left → queued with backoff + full jitter on the DB clock.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
SELECT (bgexec.configure_queue('rq', retry_base => '10 seconds', retry_cap => '40 seconds')).name;
SELECT bgexec.submit('noop', queue => 'rq', max_attempts => 4) AS j \gset
SELECT lease AS l FROM bgexec.claim('w', '{rq}', 1) \gset
SELECT bgexec.finish(:j, :l, 'failed', '{"message": "transient"}');
-- attempt 1 failed: delay in [0, 10 s]
SELECT status, attempt, error->>'message' AS error, lease IS NULL AS released,
       run_after BETWEEN now() - interval '1 minute' AND now() + interval '10 seconds' AS backoff_bounded
  FROM bgexec.job WHERE id = :j;
SELECT kind, data->>'attempt' AS attempt, (data->>'delay_ms')::int BETWEEN 0 AND 10000 AS delay_ok
  FROM bgexec.job_event WHERE job_id = :j AND kind = 'retry_scheduled';
-- not claimable before run_after (unless the jitter drew 0)
UPDATE bgexec.job SET run_after = now() + interval '1 hour' WHERE id = :j;
SELECT count(*) FROM bgexec.claim('w', '{rq}', 1);
UPDATE bgexec.job SET run_after = now() WHERE id = :j;
SELECT lease AS l FROM bgexec.claim('w', '{rq}', 1) \gset
SELECT bgexec.finish(:j, :l, 'failed', '{"message": "again"}');
-- attempt 2 failed: delay in [0, 20 s]
SELECT attempt, run_after <= now() + interval '20 seconds' AS backoff_bounded FROM bgexec.job WHERE id = :j;
UPDATE bgexec.job SET run_after = now() WHERE id = :j;
SELECT lease AS l FROM bgexec.claim('w', '{rq}', 1) \gset
-- retryable: false ends the job at once, attempts notwithstanding
SELECT bgexec.finish(:j, :l, 'failed', '{"message": "bad input", "retryable": false}');
SELECT status, attempt, max_attempts FROM bgexec.job WHERE id = :j;
SELECT event_kinds(:j), gapless(:j), terminal_events(:j);
-- the backoff is capped: at attempt 30 the delay never exceeds retry_cap
SELECT bool_and(bgexec._backoff('rq', 30) <= interval '40 seconds') AS capped,
       bool_and(bgexec._backoff('rq', 1) <= interval '10 seconds') AS base,
       bool_or(bgexec._backoff('rq', 3) > interval '20 seconds') AS jitter_spreads
  FROM generate_series(1, 200);
-- a long backoff at a high attempt: base and cap of a year, 29 failures.
-- At the 29th, base * 2^28 overflowed an interval (22008) before the cap
-- applied: the finish failed, and so did every reconcile() that met the job
SELECT (bgexec.configure_queue('rq-year', retry_base => '1 year', retry_cap => '1 year')).name;
SELECT bgexec.submit('noop', queue => 'rq-year', max_attempts => 50) AS y \gset
DO $$
DECLARE
	v_job bigint;
	v_lease bigint;
BEGIN
	FOR i IN 1..29 LOOP
		UPDATE bgexec.job SET run_after = now() WHERE queue = 'rq-year' AND status = 'queued';
		SELECT c.job_id, c.lease INTO v_job, v_lease FROM bgexec.claim('w-year', '{rq-year}', 1) c;
		IF bgexec.finish(v_job, v_lease, 'failed', '{"message": "again"}') IS DISTINCT FROM 'queued' THEN
			RAISE EXCEPTION 'attempt % was not requeued', i;
		END IF;
	END LOOP;
END $$;
SELECT status, attempt, run_after <= now() + interval '8766 hours' AS capped FROM bgexec.job WHERE id = :y;
-- the 30th attempt's worker vanishes: reconcile requeues it, with the same cap
UPDATE bgexec.job SET run_after = now(), attempt = 29 WHERE id = :y;
SELECT count(*) FROM bgexec.claim('w-year', '{rq-year}', 1);
SELECT expire_lease(:y);
SELECT bgexec.reconcile();
SELECT status, attempt, run_after <= now() + interval '8766 hours' AS capped,
       (SELECT string_agg(kind, ',' ORDER BY seq) FROM (SELECT kind, seq FROM bgexec.job_event
         WHERE job_id = :y ORDER BY seq DESC LIMIT 3) e) AS last_events
  FROM bgexec.job WHERE id = :y;
-- whatever the attempt, the delay stays within the cap
-- (a year of 365.25 days, as extract(epoch) counts it: the delay is exact)
SELECT bool_and(extract(epoch FROM bgexec._backoff('rq-year', a))
                BETWEEN 0 AND extract(epoch FROM interval '1 year')) AS capped
  FROM generate_series(1, 100) i, unnest(ARRAY[1, 31, 64, 1000, 2147483647]) a;
-- the last attempt fails for good
SELECT bgexec.submit('noop', queue => 'rq', max_attempts => 1) AS k \gset
SELECT lease AS l FROM bgexec.claim('w', '{rq}', 1) \gset
SELECT bgexec.finish(:k, :l, 'failed', '{"message": "once"}');
-- manual retry: a fresh attempt budget
SELECT bgexec.retry(:k);
SELECT status, attempt, finished_at IS NULL AS reopened FROM bgexec.job WHERE id = :k;
SELECT lease AS l FROM bgexec.claim('w', '{rq}', 1) \gset
SELECT attempt FROM bgexec.job WHERE id = :k;
SELECT bgexec.finish(:k, :l, 'completed', '{"second": "time"}');
-- retry of a completed (or running, or queued) job is refused
SELECT bgexec.retry(:k);
SELECT event_kinds(:k), gapless(:k), terminal_events(:k);
-- negative: retry of a job that does not exist
SELECT bgexec.retry(-1);
-- negative: a null job id names no job (22023)
SELECT bgexec.retry(NULL);
-- retry_after: a failure's error steers the delay of its next attempt (a
-- remote rate limit: "try again in 2 minutes"), instead of the queue's
-- backoff (here at most 10 s); the old finish ignored it
SELECT (bgexec.configure_queue('rs', retry_base => '10 seconds', retry_cap => '10 seconds')).name;
CREATE FUNCTION steer(p_error jsonb, p_attempts int DEFAULT 5)
	RETURNS TABLE (status bgexec.job_status, attempt int, delay_ms numeric, run_after_ok boolean,
	               error_kept boolean) LANGUAGE plpgsql AS $$
DECLARE
	v_job bigint;
	v_lease bigint;
BEGIN
	v_job := bgexec.submit('noop', queue => 'rs', max_attempts => p_attempts);
	SELECT c.lease INTO v_lease FROM bgexec.claim('w', '{rs}', 1) c WHERE c.job_id = v_job;
	PERFORM bgexec.finish(v_job, v_lease, 'failed', p_error);
	RETURN QUERY
	SELECT j.status, j.attempt, (e.data->>'delay_ms')::numeric,
	       j.run_after = e.created_at + (e.data->>'delay_ms')::numeric * interval '1 millisecond',
	       j.error = p_error
	  FROM bgexec.job j LEFT JOIN bgexec.job_event e ON e.job_id = j.id AND e.kind = 'retry_scheduled'
	 WHERE j.id = v_job;
	UPDATE bgexec.job x SET run_after = now() + interval '1 year' WHERE x.id = v_job AND x.status = 'queued';
END $$;
SELECT * FROM steer('{"message": "rate limited", "retry_after": 120}');
SELECT * FROM steer('{"retry_after": 0.25}');
-- 0: due at once
SELECT * FROM steer('{"retry_after": 0}');
-- at most 30 days
SELECT * FROM steer('{"retry_after": 1e12}');
-- any other value is ignored: the queue's backoff, never a refused finish
SELECT s.status, s.attempt, s.delay_ms <= 10000 AS backoff, s.error_kept
  FROM unnest(ARRAY['{"retry_after": "120"}', '{"retry_after": -1}', '{"retry_after": null}',
                    '{"retry_after": [120]}', '{"retry_after": {"s": 120}}', '[{"retry_after": 120}]',
                    '"retry_after"']::jsonb[]) b, steer(b) s;
-- a negative one is ignored, not taken as 0 (a retry at once, a hot loop
-- against the rate-limited remote): a day-long backoff (full jitter rounds
-- it to 0 ms about once in 10^8)
SELECT (bgexec.configure_queue('rs-neg', retry_base => '1 day', retry_cap => '1 day')).name;
SELECT bgexec.submit('noop', queue => 'rs-neg', max_attempts => 2) AS n \gset
SELECT lease AS l FROM bgexec.claim('w', '{rs-neg}', 1) \gset
SELECT bgexec.finish(:n, :l, 'failed', '{"retry_after": -1}');
SELECT (data->>'delay_ms')::numeric > 0 AS backoff_not_zero
  FROM bgexec.job_event WHERE job_id = :n AND kind = 'retry_scheduled';
-- it cannot give a job attempts it does not have, nor outrank retryable false
SELECT * FROM steer('{"retry_after": 120}', 1);
SELECT * FROM steer('{"retry_after": 120, "retryable": false}');
-- finish_many's failed items go the same way
SELECT bgexec.submit('noop', queue => 'rs', max_attempts => 3) AS m \gset
SELECT lease AS l FROM bgexec.claim('w', '{rs}', 1) \gset
SELECT status FROM bgexec.finish_many(jsonb_build_array(jsonb_build_object('job_id', :m, 'lease', :l,
	'outcome', 'failed', 'body', '{"retry_after": 600}'::jsonb)));
SELECT j.status, (e.data->>'delay_ms')::int AS delay_ms, j.run_after = e.created_at + interval '600 seconds' AS run_after_ok
  FROM bgexec.job j JOIN bgexec.job_event e ON e.job_id = j.id AND e.kind = 'retry_scheduled' WHERE j.id = :m;
SELECT event_kinds(:m), gapless(:m);
DROP FUNCTION steer(jsonb, int);

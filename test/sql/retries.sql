-- retries: failed with attempts left → queued with backoff + full jitter on the DB clock.
\set SHOW_CONTEXT never
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

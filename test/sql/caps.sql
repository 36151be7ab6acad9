-- caps: max_queued (admission), max_running (fleet), max_running_per_key (fairness).
\set SHOW_CONTEXT never
SELECT (bgexec.configure_queue('capq', max_queued => 2)).name;
SELECT bgexec.submit('noop', queue => 'capq') > 0, bgexec.submit('noop', queue => 'capq') > 0;
-- the queue is full: 53400, naming the queue and its cap, nothing written
SELECT * FROM try($q$SELECT bgexec.submit('noop', queue => 'capq')$q$);
SELECT count(*) FROM bgexec.job WHERE queue = 'capq';
-- a running job frees a queued slot
SELECT count(*) FROM bgexec.claim('w', '{capq}', 1);
SELECT bgexec.submit('noop', queue => 'capq') > 0 AS admitted;
-- an idempotent re-submit of an existing job is not refused by the cap
SELECT (bgexec.configure_queue('capq', max_queued => -1)).name;
SELECT bgexec.submit('noop', queue => 'capq', idempotency_key => 'cap-k') AS ck \gset
SELECT (bgexec.configure_queue('capq', max_queued => 1)).name;
SELECT bgexec.submit('noop', queue => 'capq', idempotency_key => 'cap-k') = :ck AS deduped;
-- the largest cap admits (its count's LIMIT cap + 1 overflowed: 22003 for
-- every submit to the queue)
SELECT (bgexec.configure_queue('capbig', max_queued => 2147483647)).name;
SELECT bgexec.submit('noop', queue => 'capbig') > 0 AS admitted,
       (SELECT count(*) FROM bgexec.submit_many('[{"kind": "noop", "queue": "capbig"}]')) AS admitted_many;
-- submit_many into a capped queue: admitted up to exactly max_queued,
-- refused whole past it (53400, nothing written, of either queue); a
-- duplicate key's job is returned even from the full queue
SELECT (bgexec.configure_queue('capm', max_queued => 3)).name;
SELECT bgexec.submit('noop', queue => 'capm') > 0 AS one;
SELECT count(*) AS admitted FROM bgexec.submit_many('[{"kind": "noop", "queue": "capm"}, {"kind": "noop", "queue": "capm", "idempotency_key": "capm-k"}]');
SELECT * FROM try($q$SELECT count(*) FROM bgexec.submit_many('[{"kind": "noop", "queue": "capm"}]')$q$);
SELECT * FROM try($q$SELECT count(*) FROM bgexec.submit_many('[{"kind": "noop", "queue": "capbig"}, {"kind": "noop", "queue": "capm"}]')$q$);
SELECT count(*) AS deduped FROM bgexec.submit_many('[{"kind": "noop", "queue": "capm", "idempotency_key": "capm-k"}]');
-- past the cap (lowered below the queue's depth), still returned: only
-- the queues the call added a job to are counted
SELECT (bgexec.configure_queue('capm', max_queued => 2)).name;
SELECT count(*) AS deduped_past_cap FROM bgexec.submit_many('[{"kind": "noop", "queue": "capm", "idempotency_key": "capm-k"}]');
SELECT queue, count(*) FROM bgexec.job WHERE queue IN ('capm', 'capbig') GROUP BY 1 ORDER BY 1;
-- and it counts the capped queue once per call, not once per job: 50 jobs
-- into a queue with 200 queued read 250 index entries, not 50 x 225
BEGIN;
SELECT (bgexec.configure_queue('capd', max_queued => 1000)).name;
SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'capd')) FROM generate_series(1, 200)));
SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid)) AS read0
  FROM pg_index WHERE indrelid = 'bgexec.job'::regclass \gset
SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'capd')) FROM generate_series(1, 50)));
SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid)) - :read0 < 1000 AS counted_once
  FROM pg_index WHERE indrelid = 'bgexec.job'::regclass;
ROLLBACK;
-- a retry queues its job again, so it is admitted as a submit is: at the
-- cap, 53400 and nothing changes; below it, the job is queued
SELECT (bgexec.configure_queue('capr', max_queued => 1)).name;
SELECT bgexec.submit('noop', queue => 'capr') AS rf \gset
SELECT bgexec.finish(job_id, lease, 'failed', '{}') FROM bgexec.claim('w', '{capr}', 1);
SELECT bgexec.submit('noop', queue => 'capr') AS rq \gset
SELECT * FROM try(format('SELECT bgexec.retry(%s)', :rf));
SELECT status, attempt, event_kinds(:rf) FROM bgexec.job WHERE id = :rf;
SELECT bgexec.stop(:rq);
SELECT bgexec.retry(:rf);
SELECT status, count(*) FROM bgexec.job WHERE queue = 'capr' GROUP BY 1 ORDER BY 1;
-- max_running: never more running than the cap
SELECT (bgexec.configure_queue('runq', max_running => 2)).name;
SELECT count(*) FROM (SELECT bgexec.submit('noop', queue => 'runq') FROM generate_series(1, 5)) s;
SELECT count(*) FROM bgexec.claim('w', '{runq}', 10);
SELECT count(*) FROM bgexec.claim('w', '{runq}', 10);
SELECT id AS r1, lease AS l1 FROM bgexec.job WHERE queue = 'runq' AND status = 'running' ORDER BY id LIMIT 1 \gset
SELECT bgexec.finish(:r1, :l1, 'completed', '{}');
SELECT count(*) FROM bgexec.claim('w', '{runq}', 10);
SELECT count(*) FROM bgexec.job WHERE queue = 'runq' AND status = 'running';
-- a capped queue's claim, as the fast path's, takes no job before its run_after
SELECT (bgexec.configure_queue('laterq', max_running => 5)).name;
SELECT bgexec.submit('noop', queue => 'laterq', run_after => now() + interval '1 hour') > 0 AS later,
       bgexec.submit('noop', queue => 'laterq') > 0 AS now;
SELECT count(*) FROM bgexec.claim('w', '{laterq}', 10);
SELECT count(*) FROM bgexec.job WHERE queue = 'laterq' AND status = 'queued' AND run_after > now();
-- max_running_per_key: at most 1 running per key; other keys and keyless jobs still run
SELECT (bgexec.configure_queue('keyq', max_running_per_key => 1)).name;
SELECT bgexec.submit('noop', queue => 'keyq', concurrency_key => 'tenant-a'),
       bgexec.submit('noop', queue => 'keyq', concurrency_key => 'tenant-a'),
       bgexec.submit('noop', queue => 'keyq', concurrency_key => 'tenant-b'),
       bgexec.submit('noop', queue => 'keyq') \gset
SELECT count(*) FROM bgexec.claim('w', '{keyq}', 10);
SELECT concurrency_key, count(*) FROM bgexec.job WHERE queue = 'keyq' AND status = 'running'
 GROUP BY 1 ORDER BY 1 NULLS LAST;
SELECT count(*) FROM bgexec.claim('w', '{keyq}', 10);
-- a key at its cap with a long backlog (2 001 jobs, one running): a claim
-- takes the other keys' jobs (each up to its cap, the first due in claim
-- order: b's priority 1, c's due one past its future one) and the keyless
-- ones, in claim order, and reads a bounded number of index entries, not
-- the capped key's backlog (which every claim of the queue read and
-- filtered, returning nothing: scale review F4)
BEGIN;
SELECT (bgexec.configure_queue('keyw', max_running_per_key => 1)).name;
SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'keyw',
         'concurrency_key', 'hot', 'payload', jsonb_build_object('n', 'hot'))) FROM generate_series(1, 2001)));
SELECT payload->>'n' AS running FROM bgexec.claim('w', '{keyw}', 1);
SELECT count(*) FROM (
  SELECT bgexec.submit('noop', jsonb_build_object('n', n), queue => 'keyw', priority => p, concurrency_key => k,
                       run_after => now() + ra)
    FROM (VALUES ('hot5', 'hot', 5, '0'::interval), ('b1', 'b', 0, '0'), ('b2', 'b', 1, '0'),
                 ('c0', 'c', 2, '1 hour'), ('c1', 'c', 0, '0'), ('x1', NULL, 0, '0'), ('x2', NULL, 0, '0'))
         v(n, k, p, ra)) s;
SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid)) AS read0
  FROM pg_index WHERE indrelid = 'bgexec.job'::regclass \gset
SELECT payload->>'n' AS claimed FROM bgexec.claim('w', '{keyw}', 10);
SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid)) - :read0 < 600 AS bounded
  FROM pg_index WHERE indrelid = 'bgexec.job'::regclass;
SELECT count(*) AS nothing_more FROM bgexec.claim('w', '{keyw}', 10);
SELECT concurrency_key, count(*) FROM bgexec.job WHERE queue = 'keyw' AND status = 'running'
 GROUP BY 1 ORDER BY 1 NULLS LAST;
ROLLBACK;
-- read key by key, a queue's keys are all its candidates' keys: with more
-- keys than the window (max_jobs 1: 104) the queue stays on the scan, and
-- the claim takes the highest priority's job whatever its key's place (z,
-- past the window's keys); the key by key candidates are cut to the window
-- in claim order (max_jobs 2: 108 of 54 keys, two each, and the keyless x,
-- the oldest, priority 9)
BEGIN;
SELECT (bgexec.configure_queue('keyk', max_running_per_key => 1)).name;
SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'keyk',
         'concurrency_key', 'a', 'payload', jsonb_build_object('n', 'a'))) FROM generate_series(1, 106)));
SELECT payload->>'n' AS running FROM bgexec.claim('w', '{keyk}', 1);
SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'keyk',
         'concurrency_key', format('k%s', lpad(g::text, 3, '0')), 'payload', jsonb_build_object('n', 'k')))
         FROM generate_series(1, 110) g));
SELECT bgexec.submit('noop', '{"n": "z"}', queue => 'keyk', priority => 5, concurrency_key => 'z') > 0;
SELECT payload->>'n' AS claimed FROM bgexec.claim('w', '{keyk}', 1);
ROLLBACK;
BEGIN;
SELECT (bgexec.configure_queue('keyo', max_running_per_key => 2)).name;
SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'keyo',
         'concurrency_key', 'a', 'payload', jsonb_build_object('n', 'a'))) FROM generate_series(1, 111)));
SELECT count(*) AS running FROM bgexec.claim('w', '{keyo}', 2);
SELECT bgexec.submit('noop', '{"n": "x"}', queue => 'keyo', priority => 9) > 0;
SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'keyo',
         'concurrency_key', format('k%s', lpad((g % 54)::text, 2, '0')), 'payload', jsonb_build_object('n', 'k')))
         FROM generate_series(1, 108) g));
SELECT payload->>'n' AS claimed FROM bgexec.claim('w', '{keyo}', 2) ORDER BY 1;
ROLLBACK;
-- capped and uncapped queues claimed together
SELECT bgexec.submit('noop', queue => 'freeq') > 0;
SELECT queue, count(*) FROM bgexec.claim('w', '{keyq,freeq}', 10) GROUP BY 1 ORDER BY 1;
SELECT queue, queued, running, max_queued, max_running, max_running_per_key
  FROM bgexec.queue_stats WHERE queue IN ('capq', 'runq', 'keyq') ORDER BY queue;
-- negative: a null queue name (22023; it was a not-null violation, 23502)
SELECT bgexec.configure_queue(NULL);
-- negative: a bad queue name or backoff in configure_queue
SELECT bgexec.configure_queue('bad name');
SELECT bgexec.configure_queue('q2', retry_base => '0 s');
-- negative: a retry_cap over 100 years, or with a part over it (the backoff
-- adds up to the cap to now())
SELECT bgexec.configure_queue('q2', retry_cap => '101 years');
SELECT bgexec.configure_queue('q2', retry_cap => '4000000 mons -119999000 days');
-- a negative part in either ('1 mon -29 days' compares as a day, but is
-- added to a date by the calendar: from 31 January it ended on 30 January)
SELECT bgexec.configure_queue('q2', retry_cap => '1 mon -29 days');
SELECT bgexec.configure_queue('q2', retry_base => '-1 mon +31 days 1 second', retry_cap => '2 days');
-- rate_limit: at most rate_limit claims per rate_period, a bucket of
-- rate_limit tokens that refills at that rate.  The time passed is written
-- into the bucket's row (rate_at moved back) rather than waited for.
SELECT name, rate_limit, rate_period FROM bgexec.configure_queue('rateq', rate_limit => 3, rate_period => '1 hour');
SELECT count(*) FROM (SELECT bgexec.submit('noop', queue => 'rateq') FROM generate_series(1, 10)) s;
SELECT count(*) FROM bgexec.claim('w', '{rateq}', 10);
SELECT count(*) FROM bgexec.claim('w', '{rateq}', 10);
SELECT rate_tokens FROM bgexec.queue WHERE name = 'rateq';
-- twenty minutes is one token
UPDATE bgexec.queue SET rate_at = rate_at - interval '20 minutes' WHERE name = 'rateq';
SELECT count(*) FROM bgexec.claim('w', '{rateq}', 10);
-- a day refills the bucket to its size, no more
UPDATE bgexec.queue SET rate_at = rate_at - interval '1 day' WHERE name = 'rateq';
SELECT count(*) FROM bgexec.claim('w', '{rateq}', 2);
SELECT count(*) FROM bgexec.claim('w', '{rateq}', 10);
SELECT queue, queued, running, rate_limit, rate_period FROM bgexec.queue_stats WHERE queue = 'rateq';
-- a job a running cap holds back spends no token: at max_running (7
-- running) nothing is claimed, and once the cap is gone the bucket is full
SELECT (bgexec.configure_queue('rateq', max_running => 7)).name;
UPDATE bgexec.queue SET rate_at = rate_at - interval '1 day' WHERE name = 'rateq';
SELECT count(*) FROM bgexec.claim('w', '{rateq}', 10);
SELECT (bgexec.configure_queue('rateq', max_running => -1)).name;
SELECT count(*) FROM bgexec.claim('w', '{rateq}', 10);
-- a limit of 0 starts nothing; removing the limit forgets the bucket
SELECT count(*) FROM (SELECT bgexec.submit('noop', queue => 'rateq') FROM generate_series(1, 3)) s;
SELECT name, rate_limit FROM bgexec.configure_queue('rateq', rate_limit => 0);
UPDATE bgexec.queue SET rate_at = rate_at - interval '1 day' WHERE name = 'rateq';
SELECT count(*) FROM bgexec.claim('w', '{rateq}', 10);
SELECT name, rate_limit, rate_tokens, rate_at FROM bgexec.configure_queue('rateq', rate_limit => -1);
SELECT count(*) FROM bgexec.claim('w', '{rateq}', 10);
-- a job held back by the limit wakes a waiting worker when the next token
-- is due, not at its poll: one token per 300 ms, the bucket spent, and the
-- worker's wait (5 s) ends at the token
SELECT (bgexec.configure_queue('rateq', rate_limit => 1, rate_period => '300 ms')).name;
SELECT count(*) FROM (SELECT bgexec.submit('noop', queue => 'rateq') FROM generate_series(1, 3)) s;
SELECT count(*) FROM bgexec.claim('rw', '{rateq}', 10);
SELECT count(*) FROM bgexec.claim('rw', '{rateq}', 10);
SELECT clock_timestamp() AS t0 \gset
SELECT jobs FROM bgexec.await_work('rw', '{rateq}', 10, '5 s');
SELECT clock_timestamp() - :'t0' < interval '4 s' AS woken_at_the_token;
SELECT count(*) FROM bgexec.claim('rw', '{rateq}', 10);
-- a step of the database clock back (an hour here) leaves rate_at ahead
-- of now(): the bucket refilled from then, and the queue's claims were held
-- for the step's length.  A rate_at more than a period ahead is counted
-- from a period ago: a full bucket (1 token), then the limit as before
SELECT count(*) FROM (SELECT bgexec.submit('noop', queue => 'rateq') FROM generate_series(1, 3)) s;
UPDATE bgexec.queue SET rate_tokens = 0, rate_at = now() + interval '1 hour' WHERE name = 'rateq';
SELECT count(*) FROM bgexec.claim('rw', '{rateq}', 10);
SELECT rate_at <= clock_timestamp() AS rebased FROM bgexec.queue WHERE name = 'rateq';
SELECT count(*) FROM bgexec.claim('rw', '{rateq}', 10);
SELECT pg_sleep(0.35);
SELECT count(*) FROM bgexec.claim('rw', '{rateq}', 10);
-- (a rate_at ahead by less than a period is kept: concurrent claimers'
-- clocks differ by that much, and the bucket is simply not refilled yet)
UPDATE bgexec.queue SET rate_tokens = 0, rate_at = now() + interval '200 ms' WHERE name = 'rateq';
SELECT count(*) FROM bgexec.claim('rw', '{rateq}', 10);
-- negative: a period under a millisecond or over a day, or with a negative
-- part (23514, the table's queue_rate_sane); nothing changed
SELECT * FROM try($$SELECT bgexec.configure_queue('rateq', rate_period => '0')$$);
SELECT * FROM try($$SELECT bgexec.configure_queue('rateq', rate_period => '2 days')$$);
SELECT * FROM try($$SELECT bgexec.configure_queue('rateq', rate_period => '1 day -1 hour')$$);
SELECT * FROM try($$SELECT bgexec.configure_queue('rateq', rate_period => '1 mon')$$);
SELECT rate_limit, rate_period FROM bgexec.queue WHERE name = 'rateq';
-- configure_queue at its boundaries (a mutation test's survivors): 0 is a
-- cap, kept as 0 (a negative value removes one); a submit to max_queued 0
-- is refused; nothing else changed by the refusal
SELECT name, max_queued, max_running, max_running_per_key, rate_limit
  FROM bgexec.configure_queue('zeroq', max_queued => 0, max_running => 0,
                              max_running_per_key => 0, rate_limit => 0);
SELECT * FROM try($$SELECT bgexec.submit('noop', queue => 'zeroq')$$);
SELECT count(*) FROM bgexec.job WHERE queue = 'zeroq';
SELECT name, max_queued, max_running, max_running_per_key, rate_limit
  FROM bgexec.configure_queue('zeroq', max_queued => -1, max_running => -1,
                              max_running_per_key => -1, rate_limit => -1);
-- a changed limit keeps its bucket (tokens and time); removing it forgets both
SELECT (bgexec.configure_queue('zeroq', rate_limit => 5)).name;
UPDATE bgexec.queue SET rate_tokens = 2, rate_at = '2000-01-01 00:00 UTC' WHERE name = 'zeroq';
SELECT rate_limit, rate_tokens, rate_at = '2000-01-01 00:00 UTC' AS at_kept
  FROM bgexec.configure_queue('zeroq', rate_limit => 3);
SELECT rate_limit, rate_tokens, rate_at = '2000-01-01 00:00 UTC' AS at_kept
  FROM bgexec.configure_queue('zeroq', max_running => 2);
SELECT rate_limit, rate_tokens, rate_at FROM bgexec.configure_queue('zeroq', rate_limit => -1);
-- rate_period's bounds are inclusive (1 ms, a day); retry_cap may equal
-- retry_base, not be below it (23514); a null name is 22023
SELECT rate_period FROM bgexec.configure_queue('zeroq', rate_period => '1 ms');
SELECT rate_period FROM bgexec.configure_queue('zeroq', rate_period => '1 day');
SELECT retry_base, retry_cap FROM bgexec.configure_queue('zeroq', retry_base => '5 s', retry_cap => '5 s');
SELECT * FROM try($$SELECT bgexec.configure_queue('zeroq', retry_cap => '4 s')$$);
SELECT * FROM try($$SELECT bgexec.configure_queue(NULL, max_running => 1)$$);
SELECT rate_period, retry_base, retry_cap FROM bgexec.queue WHERE name = 'zeroq';
-- A bad value's error names the parameter and its value, and keeps the
-- table constraint's SQLSTATE and name in the constraint field; a value
-- the call leaves NULL is read from the row (here retry_base 5 s against a
-- new retry_cap); the constraint itself still guards a direct write.
CREATE FUNCTION pg_temp.violation(stmt text, OUT constraint_name text, OUT message text)
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE stmt;
EXCEPTION WHEN check_violation THEN
	GET STACKED DIAGNOSTICS constraint_name = CONSTRAINT_NAME, message = MESSAGE_TEXT;
END $$;
SELECT * FROM pg_temp.violation($$SELECT bgexec.configure_queue('zeroq', retry_cap => '2 s')$$);
SELECT * FROM pg_temp.violation($$SELECT bgexec.configure_queue('no such queue!', paused => true)$$);
SELECT * FROM pg_temp.violation($$SELECT bgexec.configure_queue('zeroq', rate_period => '0')$$);
SELECT * FROM try($$UPDATE bgexec.queue SET retry_cap = '1 s' WHERE name = 'zeroq'$$);
SELECT count(*) FROM bgexec.queue WHERE name = 'no such queue!';

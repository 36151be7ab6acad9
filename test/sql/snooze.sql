-- snooze: a job whose running steps are all sleeps goes back to the queue,
-- its attempt not counted, until its first wake-up on the database clock;
-- the next run's sleep_left says what is left of each sleep.
\set SHOW_CONTEXT never
SELECT bgexec.register_worker('zw', '{zz}', 2);
SELECT bgexec.submit('workflow',
  '{"steps": [{"id": "short", "sleep": 8}, {"id": "long", "sleep": 100},
              {"id": "after", "needs": ["short", "long"], "sleep": 0}]}', queue => 'zz') AS job \gset
SELECT lease AS l1, started_seq FROM bgexec.claim('zw', '{zz}', 1) \gset
SELECT bgexec.append_events(:job, :l1,
  '[{"kind": "step_started", "data": {"step": "short"}}, {"kind": "step_started", "data": {"step": "long"}}]');
-- the worker shuts down: both sleeps are given back, from their step_started
SELECT created_at AS began FROM bgexec.job_event WHERE job_id = :job AND kind = 'step_started' LIMIT 1 \gset
SELECT bgexec.snooze(:job, :l1, '{"short": 8, "long": 100}') AS snoozed;
SELECT status, attempt, lease IS NULL AS no_lease, deadline IS NULL AS no_deadline, error IS NULL AS no_error,
       run_after = :'began'::timestamptz + interval '8 seconds' AS wakes_with_short
  FROM bgexec.job WHERE id = :job;
SELECT event_kinds(:job), gapless(:job);
SELECT data->'error'->>'reason' AS reason, data->>'attempt' AS attempt,
       (data->>'delay_ms')::int BETWEEN 7000 AND 8000 AS delay_ms,
       (data->'sleeping'->>'short')::timestamptz = :'began'::timestamptz + interval '8 seconds' AS short_until,
       (data->'sleeping'->>'long')::timestamptz = :'began'::timestamptz + interval '100 seconds' AS long_until
  FROM bgexec.job_event WHERE job_id = :job AND kind = 'retry_scheduled';
-- not claimable before its wake-up
SELECT count(*) AS claimed_early FROM bgexec.claim('zw', '{zz}', 1);
-- (as if the 8 s had passed) claimed again as attempt 1: short has nothing left, long 92 s
UPDATE bgexec.job SET run_after = now() WHERE id = :job;
SELECT lease AS l2, attempt FROM bgexec.claim('zw', '{zz}', 1) \gset
SELECT :attempt AS attempt;
SELECT bgexec.sleep_left(:job, :l2, 'short') < 8.5 AS short_left,
       bgexec.sleep_left(:job, :l2, 'long') BETWEEN 80 AND 100 AS long_left,
       bgexec.sleep_left(:job, :l2, 'after') IS NULL AS after_none,
       bgexec.sleep_left(:job, :l1, 'long') IS NULL AS stale_lease;
-- a stale lease is refused, nothing changed
SELECT bgexec.snooze(:job, :l1, '{"long": 90}') IS NULL AS refused;
-- a step with no step_started in this run cannot be given back (22023)
\set VERBOSITY terse
SELECT bgexec.snooze(:job, :l2, '{"long": 90}');
-- bad sleeps: 22023 naming the field
SELECT bgexec.snooze(:job, :l2, '{}');
SELECT bgexec.snooze(:job, :l2, '[1]');
SELECT bgexec.snooze(:job, :l2, '{"long": "90"}');
SELECT bgexec.snooze(:job, :l2, '{"long": -1}');
SELECT bgexec.snooze(:job, :l2, '{"long": 3110400001}');
\set VERBOSITY default
SELECT status, attempt FROM bgexec.job WHERE id = :job;
-- a run after that gives back nothing: sleep_left is NULL (full sleeps)
SELECT bgexec.append_events(:job, :l2, '[{"kind": "step_started", "data": {"step": "long"}}]');
SELECT bgexec.finish(:job, :l2, 'failed', '{"message": "boom"}');
SELECT bgexec.retry(:job);
UPDATE bgexec.job SET run_after = now() WHERE id = :job;
SELECT lease AS l3 FROM bgexec.claim('zw', '{zz}', 1) \gset
SELECT bgexec.sleep_left(:job, :l3, 'long') IS NULL AS full_sleep;
-- a stop requested while it slept: cancelled instead
SELECT bgexec.append_events(:job, :l3, '[{"kind": "step_started", "data": {"step": "long"}}]');
SELECT bgexec.stop(:job);
SELECT bgexec.snooze(:job, :l3, '{"long": 100}') AS stopped;
SELECT status, error->>'reason' AS reason, terminal_events(:job), gapless(:job) FROM bgexec.job WHERE id = :job;
-- A wake-up in the future wakes no waiting worker of an uncapped queue now
-- (_jobs_due: at the wake-up); one already past (a sleep of 0) wakes one at
-- once, delay_ms 0, and the next run's sleep_left is 0, never below.
SELECT bgexec.submit('workflow', '{"steps": [{"id": "nap", "sleep": 100}]}', queue => 'zf') AS fj \gset
SELECT lease AS fl FROM bgexec.claim('zw', '{zf}', 1) \gset
SELECT bgexec.append_events(:fj, :fl, '[{"kind": "step_started", "data": {"step": "nap"}}]');
SELECT jobs FROM bgexec.await_work('zfw', '{zf}', 1, '0');  -- registers the waiter
SELECT bgexec.snooze(:fj, :fl, '{"nap": 100}') AS snoozed;
SELECT jobs AS woken_before_wakeup FROM bgexec.await_work('zfw', '{zf}', 1, '0');
SELECT bgexec.submit('workflow', '{"steps": [{"id": "nap", "sleep": 0}]}', queue => 'zp') AS pj \gset
SELECT lease AS pl FROM bgexec.claim('zw', '{zp}', 1) \gset
SELECT bgexec.append_events(:pj, :pl, '[{"kind": "step_started", "data": {"step": "nap"}}]');
SELECT jobs FROM bgexec.await_work('zpw', '{zp}', 1, '0');  -- registers the waiter
SELECT pg_sleep(0.2);  -- the wake-up 200 ms past
SELECT bgexec.snooze(:pj, :pl, '{"nap": 0}') AS snoozed;
SELECT jobs AS woken_at_once FROM bgexec.await_work('zpw', '{zp}', 1, '0');
SELECT (data->>'delay_ms')::int AS delay_ms FROM bgexec.job_event WHERE job_id = :pj AND kind = 'retry_scheduled';
SELECT lease AS pl2 FROM bgexec.claim('zw', '{zp}', 1) \gset
SELECT bgexec.sleep_left(:pj, :pl2, 'nap') AS left_s;
-- A capped queue: the slot the sleeping job held is free at once, and a
-- worker waiting for its held jobs is woken (_running_ended), though the
-- wake-up is 100 s off.
SELECT (bgexec.configure_queue('zc', max_running => 1)).max_running;
SELECT bgexec.submit('workflow', '{"steps": [{"id": "nap", "sleep": 100}]}', queue => 'zc') AS cj \gset
SELECT bgexec.submit('noop', queue => 'zc') AS cn \gset
SELECT lease AS cl FROM bgexec.claim('zw', '{zc}', 2) \gset
SELECT count(*) AS held FROM bgexec.claim('zw', '{zc}', 2);
SELECT bgexec.append_events(:cj, :cl, '[{"kind": "step_started", "data": {"step": "nap"}}]');
SELECT jobs FROM bgexec.await_work('zcw', '{zc}', 1, '0');  -- registers the waiter
SELECT bgexec.snooze(:cj, :cl, '{"nap": 100}') AS snoozed;
SELECT jobs AS woken_for_the_slot FROM bgexec.await_work('zcw', '{zc}', 1, '0');
SELECT job_id = :cn AS the_held_job FROM bgexec.claim('zw', '{zc}', 2);

-- schedules: recurring jobs.  _cron_next is the first whole minute after a
-- time (UTC) that a five-field cron expression matches; schedule() and
-- unschedule() keep a caller's schedules; reconcile() submits a job for each
-- due one, as its owner, once per tick.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
SET timezone = 'UTC';
-- the expression's forms, each from the same instant (a Tuesday)
SELECT e, bgexec._cron_next(e, '2026-12-01 10:17:30+00') AS next
  FROM unnest(ARRAY[
    '* * * * *',             -- the next whole minute, strictly after
    '17 * * * *',            -- 10:17 is past (the seconds count): 11:17
    '*/15 * * * *',
    '5-10/2 * * * *',
    '50/5 9-11 * * *',       -- N/STEP: from N to the field's end
    '0 0 * * *',
    '0 12 1,15 * *',
    '0 0 1 jan *',           -- names, any case
    '0 0 * * SAT',
    '0 0 * * 7',             -- 7 is Sunday, like 0
    '0 9 * * mon-fri',
    '0 0 13 * fri',          -- both days restricted: a 13th OR a Friday
    '0 0 */2 * fri',         -- a day field starting with *: both must match
    '0 0 31 * *',            -- skips the months without a 31st
    '0 0 29 2 *',            -- the next 29th of February
    '@hourly', '@daily', '@midnight', '@weekly', '@monthly', '@yearly', '@annually',
    '  0   0  *  *  *  '     -- spaces around and between fields
  ]) AS e;
-- a minute boundary is strictly after; the year wraps; 29 February of 2096, then 2104
SELECT bgexec._cron_next('30 10 * * *', '2026-12-01 10:30:00+00') AS at_the_minute,
       bgexec._cron_next('59 23 31 12 *', '2026-12-31 23:59:00+00') AS next_year,
       bgexec._cron_next('0 0 29 2 *', '2096-03-01+00') AS after_2100;
-- bad expressions: 22023 naming the field and the item
SELECT left(e, 20) AS e, (try(format('SELECT bgexec._cron_next(%L, now())', e))).*
  FROM unnest(ARRAY[
    '', '* * * *', '* * * * * *', '60 * * * *', '* 24 * * *', '* * 0 * *', '* * 32 * *',
    '* * * 13 *', '* * * * 8', '4294967296 * * * *', '99999999999 * * * *', '*/0 * * * *', '*/61 * * * *', '5-1 * * * *', 'x * * * *',
    '1,,2 * * * *', ',1 * * * *', '* * * foo *', '1- * * * *', '@sometimes', '@daily 5',
    '0 0 30 2 *', '0 0 31 4,6,9,11 *', repeat('1,', 150) || '1 * * * *'
  ]) AS e;
SELECT * FROM try($$SELECT bgexec._cron_next('* * * * *', 'infinity')$$);
-- another zone's wall clock, daylight saving time included
SELECT bgexec._cron_next('0 9 * * *', '2026-12-01 10:00+00', 'Europe/Paris') AS paris_winter,
       bgexec._cron_next('0 9 * * *', '2026-07-01 10:00+00', 'Europe/Paris') AS paris_summer,
       bgexec._cron_next('0 0 * * mon', '2026-12-01 10:00+00', 'Pacific/Auckland') AS auckland_monday;
-- New York: 02:30 is skipped on 14 March 2027 (runs at 03:30 EDT, late);
-- 01:30 is shown twice on 1 November 2026 (runs once, at the first)
SELECT bgexec._cron_next('30 2 * * *', '2027-03-13 07:30+00', 'America/New_York') AS skipped_runs_late,
       bgexec._cron_next('30 1 * * *', '2026-10-31 05:30+00', 'America/New_York') AS repeated_runs_once,
       bgexec._cron_next('30 1 * * *', '2026-11-01 05:30+00', 'America/New_York') AS and_next_day,
       bgexec._cron_next('30 1 * * *', '2026-11-01 06:10+00', 'America/New_York') AS from_the_second;
-- ... and every skipped time runs late, not only the first: after 02:00 ran
-- (at 03:00 EDT), 02:30 runs at 03:30; a search from just before the jump
-- finds 02:00 (at 03:00), not the next day; London's 01:20 and 01:40 run
-- at 02:20 and 02:40 BST.  The search started on the new clock (03:01) and
-- never came back to the skipped minutes after it.
SELECT bgexec._cron_next('0,30 2 * * *', '2027-03-14 03:00:05-04', 'America/New_York') AS second_skipped,
       bgexec._cron_next('0 2 * * *', '2027-03-14 01:59:30-05', 'America/New_York') AS from_before_the_jump,
       bgexec._cron_next('*/20 1 * * *', '2027-03-28 02:00:05+01', 'Europe/London') AS london_next_20;
-- every hour in the hour field: both showings of the repeated hour run, at
-- their pace (05:xx UTC is EDT's 01:xx, 06:xx EST's)
SELECT after, bgexec._cron_next('*/20 * * * *', after, 'America/New_York') AS every_20_min
  FROM unnest('{2026-11-01 04:50+00, 2026-11-01 05:40+00, 2026-11-01 05:50+00,
                2026-11-01 06:20+00, 2026-11-01 06:40+00}'::timestamptz[]) AS after;
-- a restricted hour in the repeated hour: its first showing only
SELECT bgexec._cron_next('*/20 1 * * *', '2026-11-01 05:40+00', 'America/New_York') AS hour_1_once;
-- Paris goes back from 03:00 to 02:00 at 01:00 UTC
SELECT bgexec._cron_next('0 * * * *', '2026-10-25 00:30+00', 'Europe/Paris') AS second_02h,
       bgexec._cron_next('0 * * * *', '2026-10-25 01:00+00', 'Europe/Paris') AS then_03h;
SELECT * FROM try($$SELECT bgexec._cron_next('* * * * *', now(), 'Mars/Olympus')$$);
-- a name past the zone database's longest is refused by its length, not
-- quoted back whole
SELECT * FROM try($$SELECT bgexec._cron_next('* * * * *', now(), repeat('A', 100000))$$);
-- Paris was 561 seconds off UTC (local mean time) until 1911: no whole minutes
SELECT * FROM try($$SELECT bgexec._cron_next('0 2 * * *', '1900-03-01 00:00+00', 'Europe/Paris')$$);
SELECT bgexec._cron_next('0 2 * * *', '1912-03-01 00:00+00', 'Europe/Paris') AS after_local_mean_time;
-- schedule(): a client's recurring job, visible to its owner only
SET ROLE regress_alice;
SELECT bgexec.schedule('nightly', '0 3 * * *', 'noop', '{"a": 1}', queue => 'sch') AS first_run \gset
SELECT owner, name, cron, kind, payload, queue, max_attempts, last_run_at, last_job_id, last_error
  FROM bgexec.schedule;
SET ROLE regress_bob;
SELECT count(*) AS alices_seen_by_bob FROM bgexec.schedule;
-- bob's own "nightly" is another schedule
SELECT bgexec.schedule('nightly', '@hourly', 'noop', queue => 'sch-bob') IS NOT NULL AS bobs;
RESET ROLE;
SELECT :'first_run' = bgexec._cron_next('0 3 * * *', now()) AS returns_first_run;
SELECT owner, name, cron FROM bgexec.schedule ORDER BY owner;
-- a due schedule fires on reconcile(): one job as the schedule's owner, its
-- key naming the tick; the next run moves past now
UPDATE bgexec.schedule SET next_run_at = '2026-01-01 03:00+00'
 WHERE owner = 'regress_alice' AND name = 'nightly';
SELECT bgexec.reconcile();
SELECT owner, kind, payload, queue, status, max_attempts, idempotency_key
  FROM bgexec.job WHERE queue LIKE 'sch%';
SELECT owner, last_run_at, last_job_id = (SELECT id FROM bgexec.job WHERE queue = 'sch') AS its_job,
       next_run_at = bgexec._cron_next(cron, now()) AS next_after_now, last_error
  FROM bgexec.schedule ORDER BY owner;
-- it was due many times over (since January): fired once; nothing more now
SELECT bgexec.reconcile();
SELECT count(*) AS jobs FROM bgexec.job WHERE queue LIKE 'sch%';
-- the same tick fired again returns the same job (the key), and moves on
UPDATE bgexec.schedule SET next_run_at = '2026-01-01 03:00+00'
 WHERE owner = 'regress_alice' AND name = 'nightly';
SELECT bgexec._fire_schedules() AS fired;
SELECT count(*) AS jobs FROM bgexec.job WHERE queue LIKE 'sch%';
-- a tick that cannot submit is skipped, its error kept; the others fire
SELECT (bgexec.configure_queue('sch-full', max_queued => 1)).name;
SET ROLE regress_alice;
SELECT bgexec.submit('noop', queue => 'sch-full') > 0 AS filled;
SELECT bgexec.schedule('full', '*/5 * * * *', 'noop', queue => 'sch-full') > now() AS later;
RESET ROLE;
UPDATE bgexec.schedule SET next_run_at = now() - interval '1 minute' WHERE name IN ('full', 'nightly');
SELECT bgexec._fire_schedules() AS fired;
SELECT owner, name, last_error, next_run_at > now() AS moved_on,
       last_job_id IS NOT NULL AS has_job
  FROM bgexec.schedule ORDER BY owner, name;
-- a capped queue's tick in a transaction that is not READ COMMITTED (a
-- worker's reconcile on a role that defaults to REPEATABLE READ) stays due,
-- and fires at a reconcile that is; it was taken for the tick's failure
SELECT (bgexec.configure_queue('rr-sched', max_queued => 10)).name;
SET ROLE regress_alice;
SELECT bgexec.schedule('rr', '0 3 * * *', 'noop', queue => 'rr-sched') > now() AS later;
RESET ROLE;
UPDATE bgexec.schedule SET next_run_at = now() - interval '5 seconds' WHERE name = 'rr';
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT bgexec._fire_schedules() AS fired_in_repeatable_read;
COMMIT;
SELECT last_error, next_run_at < now() AS still_due FROM bgexec.schedule WHERE name = 'rr';
SELECT bgexec._fire_schedules() AS fired_in_read_committed;
SELECT last_error, next_run_at > now() AS moved_on,
       (SELECT queue FROM bgexec.job WHERE id = last_job_id) AS job_queue
  FROM bgexec.schedule WHERE name = 'rr';
SET ROLE regress_alice;
SELECT bgexec.unschedule('rr');
RESET ROLE;
DELETE FROM bgexec.job WHERE queue = 'rr-sched';
-- overlap false: a tick is skipped while the last run's job is unfinished
SET ROLE regress_alice;
SELECT bgexec.schedule('one-at-a-time', '* * * * *', 'noop', queue => 'sch-one', overlap => false) > now() AS scheduled;
RESET ROLE;
UPDATE bgexec.schedule SET next_run_at = '2026-01-01 00:00+00' WHERE name = 'one-at-a-time';
SELECT bgexec._fire_schedules() AS fired;
UPDATE bgexec.schedule SET next_run_at = '2026-01-01 00:01+00' WHERE name = 'one-at-a-time';
SELECT bgexec._fire_schedules() AS fired_while_queued;
SELECT overlap, regexp_replace(last_error, 'job \d+', 'job N') AS last_error, next_run_at > now() AS moved_on
  FROM bgexec.schedule WHERE name = 'one-at-a-time';
-- a skipped tick is no run: the last run's time and job are kept, and so
-- the next tick is skipped too while that job is unfinished
SELECT last_run_at = '2026-01-01 00:00+00' AS last_run_kept,
       last_job_id = (SELECT id FROM bgexec.job WHERE queue = 'sch-one') AS last_job_kept
  FROM bgexec.schedule WHERE name = 'one-at-a-time';
UPDATE bgexec.schedule SET next_run_at = '2026-01-01 00:01:30+00' WHERE name = 'one-at-a-time';
SELECT bgexec._fire_schedules() AS fired_while_queued_again;
SELECT count(*) AS jobs FROM bgexec.job WHERE queue = 'sch-one';
-- once that job has ended, the next tick fires
SELECT bgexec.finish(job_id, lease, 'completed') FROM bgexec.claim('w', '{sch-one}', 1);
UPDATE bgexec.schedule SET next_run_at = '2026-01-01 00:02+00' WHERE name = 'one-at-a-time';
SELECT bgexec._fire_schedules() AS fired_after_it_ended;
SELECT last_error, (SELECT count(*) FROM bgexec.job WHERE queue = 'sch-one') AS jobs
  FROM bgexec.schedule WHERE name = 'one-at-a-time';
DELETE FROM bgexec.schedule WHERE name = 'one-at-a-time';
-- an expression written past schedule() does not stop reconcile(): the tick
-- fires, and the schedule waits a day, its error kept
UPDATE bgexec.schedule SET cron = 'bogus', next_run_at = now() - interval '1 minute'
 WHERE owner = 'regress_bob';
SELECT bgexec.reconcile();
SELECT owner, last_error, next_run_at > now() + interval '23 hours' AS in_a_day
  FROM bgexec.schedule WHERE owner = 'regress_bob';
-- a role that lost bgexec_client (or was dropped) submits nothing more
CREATE ROLE regress_carol LOGIN IN ROLE bgexec_client;
SET ROLE regress_carol;
SELECT bgexec.schedule('carols', '@hourly', 'noop', queue => 'sch-carol') > now() AS scheduled;
RESET ROLE;
REVOKE bgexec_client FROM regress_carol;
UPDATE bgexec.schedule SET next_run_at = now() - interval '1 minute' WHERE owner = 'regress_carol';
SELECT bgexec._fire_schedules() AS fired;
SELECT last_error, last_job_id FROM bgexec.schedule WHERE owner = 'regress_carol';
DROP ROLE regress_carol;
UPDATE bgexec.schedule SET next_run_at = now() - interval '1 minute' WHERE owner = 'regress_carol';
SELECT bgexec._fire_schedules() AS fired;
SELECT last_error, last_job_id FROM bgexec.schedule WHERE owner = 'regress_carol';
SELECT count(*) AS carols_jobs FROM bgexec.job WHERE queue = 'sch-carol';
DELETE FROM bgexec.schedule WHERE owner = 'regress_carol';
-- pause_schedule: a paused schedule fires nothing, and stays paused when
-- replaced; resume_schedule fires again from its next minute after now, not
-- the ticks that came while it was paused; another role's is out of reach
SET ROLE regress_alice;
SELECT bgexec.schedule('pausable', '* * * * *', 'noop', queue => 'sch-pause') > now() AS scheduled;
SELECT bgexec.pause_schedule('pausable') AS paused, bgexec.pause_schedule('pausable') AS again,
       bgexec.pause_schedule('no-such') AS none;
SET ROLE regress_bob;
SELECT bgexec.pause_schedule('pausable') AS bob_pauses_alices,
       bgexec.resume_schedule('pausable') AS bob_resumes_alices;
RESET ROLE;
UPDATE bgexec.schedule SET next_run_at = '2026-01-01 00:00+00' WHERE name = 'pausable';
SELECT bgexec._fire_schedules() AS fired_while_paused;
SET ROLE regress_alice;
SELECT bgexec.schedule('pausable', '*/5 * * * *', 'noop', queue => 'sch-pause') > now() AS replaced;
SELECT paused AS still_paused FROM bgexec.schedule WHERE name = 'pausable';
RESET ROLE;
UPDATE bgexec.schedule SET next_run_at = '2026-01-01 00:00+00' WHERE name = 'pausable';
SELECT bgexec._fire_schedules() AS fired_while_paused;
SELECT count(*) AS jobs FROM bgexec.job WHERE queue = 'sch-pause';
SET ROLE regress_alice;
SELECT bgexec.resume_schedule('pausable') AS resumed_next \gset
SELECT bgexec.resume_schedule('pausable') = :'resumed_next' AS again_unchanged,
       bgexec.resume_schedule('no-such') AS none;
SELECT paused FROM bgexec.schedule WHERE name = 'pausable';
RESET ROLE;
SELECT :'resumed_next' = bgexec._cron_next('*/5 * * * *', now()) AS from_now;
-- resumed, a due tick fires
UPDATE bgexec.schedule SET next_run_at = now() - interval '1 minute' WHERE name = 'pausable';
SELECT bgexec._fire_schedules() AS fired;
SELECT count(*) AS jobs FROM bgexec.job WHERE queue = 'sch-pause';
DELETE FROM bgexec.schedule WHERE name = 'pausable';
-- run_schedule: the job now, out of turn, paused or not; recorded as the
-- last run, the next tick left where it was
SET ROLE regress_alice;
SELECT bgexec.schedule('adhoc', '0 3 * * *', 'noop', '{"n": 1}', queue => 'sch-run',
                       overlap => false) AS adhoc_next \gset
SELECT bgexec.pause_schedule('adhoc') AS paused;
SELECT bgexec.run_schedule('adhoc') AS run1 \gset
SELECT owner, kind, payload, status, idempotency_key LIKE 'schedule:adhoc@manual:%' AS key_names_it
  FROM bgexec.job WHERE id = :run1;
SELECT last_job_id = :run1 AS last_job, last_run_at > now() - interval '1 minute' AS last_run_now,
       next_run_at = :'adhoc_next' AS next_kept, paused, last_error
  FROM bgexec.schedule WHERE name = 'adhoc';
-- overlap false: refused while that job is unfinished (55006, nothing
-- submitted); another role's schedule, or none, is NULL
SELECT sqlstate, regexp_replace(message, 'job \d+', 'job N') AS message
  FROM try($$SELECT bgexec.run_schedule('adhoc')$$);
SET ROLE regress_bob;
SELECT bgexec.run_schedule('adhoc') AS bobs_run_of_alices;
RESET ROLE;
SELECT count(*) AS jobs FROM bgexec.job WHERE queue = 'sch-run';
-- once it has ended, it runs again
SELECT bgexec.finish(job_id, lease, 'completed') FROM bgexec.claim('w', '{sch-run}', 1);
SET ROLE regress_alice;
SELECT bgexec.run_schedule('adhoc') > :run1 AS ran_again, bgexec.run_schedule('no-such') AS none;
RESET ROLE;
SELECT count(*) AS jobs FROM bgexec.job WHERE queue = 'sch-run';
-- two calls in one transaction: one job (the key is the transaction's
-- start), its id twice; overlap false does not refuse the second
SELECT bgexec.finish(job_id, lease, 'completed') FROM bgexec.claim('w', '{sch-run}', 1);
SET ROLE regress_alice;
BEGIN;
SELECT bgexec.run_schedule('adhoc') AS run3 \gset
SELECT bgexec.run_schedule('adhoc') = :run3 AS same_job;
COMMIT;
RESET ROLE;
SELECT count(*) AS jobs FROM bgexec.job WHERE queue = 'sch-run';
DELETE FROM bgexec.schedule WHERE name = 'adhoc';
-- replacing a schedule keeps its history, clears its error, starts from now
SET ROLE regress_bob;
SELECT bgexec.schedule('nightly', '30 4 * * *', 'noop', queue => 'sch-bob',
                       time_zone => 'Asia/Tokyo') > now() AS replaced;
SELECT cron, time_zone, last_error, last_job_id IS NOT NULL AS history_kept,
       next_run_at - now() < interval '1 day' AS from_now,
       to_char(next_run_at AT TIME ZONE 'Asia/Tokyo', 'HH24:MI') AS tokyo_time FROM bgexec.schedule;
-- bad input: a clear error naming the field, nothing stored
SELECT * FROM try($$SELECT bgexec.schedule('bad name', '* * * * *', 'noop')$$);
SELECT * FROM try($$SELECT bgexec.schedule(NULL, '* * * * *', 'noop')$$);
SELECT * FROM try($$SELECT bgexec.schedule('x', NULL, 'noop')$$);
SELECT * FROM try($$SELECT bgexec.schedule('x', '61 * * * *', 'noop')$$);
SELECT * FROM try($$SELECT bgexec.schedule('x', '* * * * *', 'bad kind')$$);
SELECT * FROM try($$SELECT bgexec.schedule('x', '* * * * *', 'workflow', '{"steps": [{"id": "a", "needs": ["b"], "run": ["true"]}]}')$$);
SELECT * FROM try($$SELECT bgexec.schedule('x', '* * * * *', 'noop', max_attempts => 0)$$);
SELECT * FROM try($$SELECT bgexec.schedule('x', '* * * * *', 'noop', timeout => '200 years')$$);
SELECT * FROM try($$SELECT bgexec.schedule('x', '* * * * *', 'noop', time_zone => 'Nowhere/Special')$$);
-- clocks whose minutes are not whole minutes of UTC: leap seconds, an
-- offset in seconds (each crashed the backend, searching for ever; the
-- last was stored, and crashed the watchdog in each minute's last second)
SELECT * FROM try($$SELECT bgexec.schedule('x', '* * * * *', 'noop', time_zone => 'right/UTC')$$);
SELECT * FROM try($$SELECT bgexec.schedule('x', '* * * * *', 'noop', time_zone => 'UTC+0:00:01')$$);
SELECT * FROM try($$SELECT bgexec.schedule('x', '* * * * *', 'noop', time_zone => 'UTC-0:00:01')$$);
-- ... nor one whose daylight time is seconds off UTC, given in standard
-- time: refused at its next clock change (it was taken, and each tick in
-- daylight time failed, moving the schedule a day on)
RESET ROLE;
SELECT * FROM try($$SELECT bgexec._cron_next('* * * * *', '2026-01-15 00:00+00', 'AAA0BBB-0:00:30,M3.2.0,M11.1.0')$$);
SELECT bgexec._cron_next('0 3 * * *', '2026-01-15 00:00+00', 'AAA0BBB-1,M3.2.0,M11.1.0') AS whole_minutes_dst;
SET ROLE regress_bob;
SELECT * FROM try($$SELECT bgexec.schedule('x', '* * * * *', 'noop', time_zone => NULL)$$);
SELECT * FROM try($$SELECT bgexec.schedule('x', '* * * * *', 'noop', overlap => NULL)$$);
SELECT count(*) AS stored FROM bgexec.schedule WHERE name = 'x';
-- a null name names no schedule: 22023, as a null job id to stop (it was
-- false or NULL, as for a name that is not there)
SELECT f, (try(format('SELECT bgexec.%s(NULL)', f))).*
  FROM unnest('{unschedule,pause_schedule,resume_schedule,run_schedule}'::text[]) AS f;
-- unschedule: the caller's own; the jobs it submitted stay
SELECT bgexec.unschedule('nightly') AS deleted, bgexec.unschedule('nightly') AS again,
       bgexec.unschedule('full') AS alices_not_bobs;
RESET ROLE;
SELECT owner, name FROM bgexec.schedule ORDER BY owner, name;
SELECT count(*) AS jobs_kept FROM bgexec.job WHERE queue LIKE 'sch%';
-- workers do not schedule; a group role is not an owner
SET ROLE regress_worker;
SELECT * FROM try($$SELECT bgexec.schedule('w', '* * * * *', 'noop')$$);
RESET ROLE;
SET ROLE bgexec_client;
SELECT * FROM try($$SELECT bgexec.schedule('g', '* * * * *', 'noop')$$);
RESET ROLE;
-- a tick due at this very instant fires: next_run_at = now(), in one
-- transaction (a mutation test: next_run_at < now() passed every suite)
BEGIN;
SET ROLE regress_alice;
SELECT bgexec.schedule('instant', '0 0 1 1 *', 'noop', queue => 'sch-now') > now() AS later;
RESET ROLE;
UPDATE bgexec.schedule SET next_run_at = now() WHERE owner = 'regress_alice' AND name = 'instant';
SELECT bgexec._fire_schedules() >= 1 AS fired;
SELECT last_job_id IS NOT NULL AS fired_at_now, next_run_at > now() AS moved_on
  FROM bgexec.schedule WHERE owner = 'regress_alice' AND name = 'instant';
ROLLBACK;
-- leave nothing to the suites after this one
DELETE FROM bgexec.schedule;
SELECT count(*) AS cancelled FROM bgexec.job j, bgexec.stop(j.id) WHERE j.queue LIKE 'sch%';
SELECT stats_mismatch();

-- sqltime: the instants the extension computes from a user's interval do not
-- depend on the session's TimeZone; a heartbeat ahead of the DB clock is not
-- alive; a back-dated run_after is now().
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
-- A zone whose clocks go forward an hour at the next UTC midnight
-- (p_days = 1) or went forward at the last one (p_days = 0), whatever the
-- date: a POSIX rule, summer time from that day (zero-based day of the
-- year, leap days counted) until half a year later.
CREATE FUNCTION pg_temp.dst_zone(p_days int) RETURNS text LANGUAGE sql AS $$
	SELECT set_config('TimeZone', format('AAA0BBB,%s/0,%s/0', d, (d + 180) % 365), false)
	  FROM (SELECT extract(doy FROM (now() AT TIME ZONE 'UTC')::date + p_days)::int - 1 AS d) s $$;
SELECT pg_temp.dst_zone(1) IS NOT NULL AS zone_set;
-- (the zone does change within a day of now: '1 day' is 23 hours on its calendar)
SELECT (now() + interval '1 day') - now() AS calendar_day;
-- 1. timeout '1 day' / '1 mon' and lease_for '1 day': exactly 24 h and
-- 30 days after the claim's start, as in any other zone
SELECT bgexec.submit('noop', queue => 'sqlt-dl', timeout => '1 day') AS day_job \gset
SELECT bgexec.submit('noop', queue => 'sqlt-dl', timeout => '1 mon') AS mon_job \gset
SELECT c.job_id = :day_job AS day_first FROM bgexec.claim('sqlt-w', '{sqlt-dl}', 1, lease_for => '1 day') c;
SELECT c.job_id = :mon_job AS mon_next FROM bgexec.claim('sqlt-w', '{sqlt-dl}', 1) c;
SELECT id = :day_job AS day, extract(epoch FROM deadline - started_at) AS deadline_s,
       extract(epoch FROM lease_expires_at - started_at) AS lease_s
  FROM bgexec.job WHERE id IN (:day_job, :mon_job) ORDER BY id;
-- heartbeat's lease_for '1 day': 24 h from its clock
SELECT lease AS l FROM bgexec.job WHERE id = :mon_job \gset
SELECT action FROM bgexec.heartbeat('sqlt-w', ARRAY[:l]::bigint[], '1 day');
SELECT extract(epoch FROM lease_expires_at - clock_timestamp()) BETWEEN 86400 - 60 AND 86400 AS hb_lease_24h
  FROM bgexec.job WHERE id = :mon_job;
-- the same in UTC
SET TimeZone = 'UTC';
SELECT bgexec.submit('noop', queue => 'sqlt-dl', timeout => '1 day') AS utc_job \gset
SELECT count(*) FROM bgexec.claim('sqlt-w', '{sqlt-dl}', 1);
SELECT extract(epoch FROM deadline - started_at) AS utc_deadline_s FROM bgexec.job WHERE id = :utc_job;
-- the retry backoff: a delay of up to two days is time only (no day part
-- that the session's calendar would stretch or shorten)
SELECT (bgexec.configure_queue('sqlt-bo', retry_base => '2 days', retry_cap => '2 days')).name;
SELECT setseed(0.25);
SELECT bool_and(extract(day FROM d) = 0 AND extract(month FROM d) = 0 AND d <= interval '48 hours')
         AS backoff_is_time
  FROM (SELECT bgexec._backoff('sqlt-bo', 1) AS d FROM generate_series(1, 40)) s;
-- retention: purge('1 day') keeps a job finished 23.5 hours ago, though the
-- clocks of this zone went forward an hour since
SELECT pg_temp.dst_zone(0) IS NOT NULL AS zone_set;
SELECT now() - (now() - interval '1 day') AS calendar_day_back;
SELECT bgexec.submit('noop', queue => 'sqlt-ret') AS ret_job \gset
SELECT lease AS rl FROM bgexec.claim('sqlt-w', '{sqlt-ret}', 1) \gset
SELECT bgexec.finish(:ret_job, :rl, 'completed', '{}');
UPDATE bgexec.job SET finished_at = now() - interval '23 hours 30 minutes' WHERE id = :ret_job;
SELECT bgexec.purge('1 day') AS purged_day;
SELECT count(*) AS kept FROM bgexec.job WHERE id = :ret_job;
SELECT bgexec.purge('23 hours') AS purged_23h;
RESET TimeZone;
-- the helper itself: exact, to the microsecond
SELECT bgexec._exact(iv) AS exact, extract(epoch FROM bgexec._exact(iv)) = extract(epoch FROM iv) AS same_epoch
  FROM (VALUES (interval '1 day'), ('1 mon'), ('1 year'), ('100 years 11 mons 29 days 23:59:59.999999'),
               ('1 day -1 hour'), ('-1 mon'), ('00:00:00.000001')) v(iv);

-- 2. worker_stats.alive: a heartbeat more than a lease ahead of the DB
-- clock (written before a step of the clock back) is not alive, with a
-- live lease or not; one within the lease is
SELECT bgexec.register_worker('sqlt-ahead', '{sqlt-alive}', 1, '{"host": "h", "pid": 11, "lease_s": 30}');
SELECT bgexec.register_worker('sqlt-near', '{sqlt-alive}', 1, '{"host": "h", "pid": 12, "lease_s": 30}');
SELECT bgexec.submit('noop', queue => 'sqlt-alive') AS al_job \gset
SELECT count(*) FROM bgexec.claim('sqlt-ahead', '{sqlt-alive}', 1);
UPDATE bgexec.worker SET heartbeat_at = now() + interval '1 hour' WHERE id = 'sqlt-ahead';
UPDATE bgexec.job SET lease_expires_at = now() + interval '1 hour' WHERE id = :al_job;
UPDATE bgexec.worker SET heartbeat_at = now() + interval '20 seconds' WHERE id = 'sqlt-near';
SELECT id, alive, in_flight FROM bgexec.worker_stats WHERE id LIKE 'sqlt-%' ORDER BY id;
SELECT workers FROM bgexec.queue_stats WHERE queue = 'sqlt-alive';
-- its next heartbeat writes the DB clock: alive again
SELECT count(*) FROM bgexec.heartbeat('sqlt-ahead', '{}');
SELECT id, alive FROM bgexec.worker_stats WHERE id = 'sqlt-ahead';
SELECT workers FROM bgexec.queue_stats WHERE queue = 'sqlt-alive';

-- _retire_workers agrees (the watchdog's retention of worker rows): a row
-- whose last sign of life (heartbeat or stop) is more than a lease ahead
-- is gone since a time it cannot tell, and is retired at once, where it
-- stayed until the clock caught up; one within the lease stays, and so does
-- one with a job running under its id.  Rolled back: other files' rows stay.
BEGIN;
SELECT count(bgexec.register_worker('sqlt-retire-' || n, '{sqlt-retire}', 1, '{"lease_s": 30}'))
  FROM unnest(ARRAY['ahead', 'stopped-ahead', 'near', 'holding', 'just-over']) n;
SELECT bgexec.submit('noop', queue => 'sqlt-retire') IS NOT NULL AS submitted;
SELECT count(*) FROM bgexec.claim('sqlt-retire-holding', '{sqlt-retire}', 1, '1 hour');
UPDATE bgexec.worker SET heartbeat_at = now() + interval '1 hour'
 WHERE id IN ('sqlt-retire-ahead', 'sqlt-retire-holding');
UPDATE bgexec.worker SET heartbeat_at = now() - interval '1 hour', stopped_at = now() + interval '1 hour'
 WHERE id = 'sqlt-retire-stopped-ahead';
UPDATE bgexec.worker SET heartbeat_at = now() + interval '20 seconds' WHERE id = 'sqlt-retire-near';
-- just over a lease ahead (31 s of 30): retired (a margin of ten leases
-- passed before: a mutation test)
UPDATE bgexec.worker SET heartbeat_at = now() + interval '31 seconds' WHERE id = 'sqlt-retire-just-over';
SELECT bgexec._retire_workers('7 days') >= 3 AS retired;
SELECT id FROM bgexec.worker WHERE id LIKE 'sqlt-retire-%' ORDER BY id;
ROLLBACK;

-- 3. a run_after in the past is stored as now(): the job queues behind the
-- jobs of its priority queued before it (submit, submit_many both ways)
SELECT bgexec.submit('noop', '{"n": "first"}', queue => 'sqlt-fifo') IS NOT NULL AS queued;
SELECT bgexec.submit('noop', '{"n": "backdated"}', queue => 'sqlt-fifo', run_after => now() - interval '1 day') AS bd \gset
SELECT count(*) FROM bgexec.submit_many('[{"kind": "noop", "queue": "sqlt-fifo", "payload": {"n": "many"}, "run_after": "2000-01-01T00:00:00Z"}]');
SELECT count(*) FROM bgexec.submit_many('[{"kind": "noop", "queue": "sqlt-fifo", "payload": {"n": "keyed"}, "run_after": "2000-01-01T00:00:00Z", "idempotency_key": "sqlt-k"}]');
SELECT payload->>'n' AS n, run_after = created_at AS at_submit
  FROM bgexec.job WHERE queue = 'sqlt-fifo' ORDER BY id;
SELECT oldest_queued_age < interval '1 hour' AS age_not_backdated FROM bgexec.queue_stats WHERE queue = 'sqlt-fifo';
SELECT string_agg(c.payload->>'n', ',') AS claim_order
  FROM bgexec.claim('sqlt-w2', '{sqlt-fifo}', 1) c;
SELECT string_agg(c.payload->>'n', ',' ORDER BY c.job_id) AS then_claimed
  FROM bgexec.claim('sqlt-w2', '{sqlt-fifo}', 10) c;
-- a future run_after is kept as given
SELECT bgexec.submit('noop', queue => 'sqlt-fut', run_after => now() + interval '1 hour') AS fut \gset
SELECT run_after - created_at AS future_kept FROM bgexec.job WHERE id = :fut;

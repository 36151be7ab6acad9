-- reschedule: a queued job of the caller's moved to another run_after or
-- priority; an event; refused (55000) for a job that is not queued; another
-- tenant's job does not exist for the caller.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
SET ROLE regress_alice;
SELECT bgexec.submit('noop', queue => 'rs', run_after => now() + interval '1 hour') AS a \gset
SELECT bgexec.submit('noop', queue => 'rs', run_after => now() + interval '2 hours') AS b \gset
-- earlier: from an hour ahead to now; a past time is stored as now(), as submit stores it
SELECT bgexec.reschedule(:b, now() - interval '1 day') = now() AS now_returned;
SELECT run_after <= now() AS runnable_now, priority FROM bgexec.job WHERE id = :b;
-- the claim takes it at once, not the job due in an hour
RESET ROLE;
SELECT job_id = :b AS claimed_b FROM bgexec.claim('w-rs', '{rs}', 5);
SET ROLE regress_alice;
-- priority alone keeps run_after; run_after alone keeps priority
SELECT bgexec.reschedule(:a, priority => 5) = run_after AS kept FROM bgexec.job WHERE id = :a;
SELECT bgexec.reschedule(:a, now() + interval '3 hours') = now() + interval '3 hours' AS later;
SELECT run_after - now() BETWEEN '2 h 59 min' AND '3 h' AS due_in_3h, priority FROM bgexec.job WHERE id = :a;
SELECT event_kinds(:a), gapless(:a);
-- its times in UTC (Z); the second event's previous run_after is the first's run_after
SELECT seq, data->>'priority' AS priority, data->>'previous_priority' AS previous,
       data->>'run_after' LIKE '%Z' AS utc,
       (data->>'run_after')::timestamptz - now() BETWEEN '59 min' AND '3 h' AS due_later,
       lag(data->>'run_after') OVER (ORDER BY seq) = data->>'previous_run_after' AS chained,
       data->>'by' AS by
  FROM bgexec.job_event WHERE job_id = :a ORDER BY seq;
SELECT (data->>'run_after')::timestamptz = j.run_after AS event_is_row
  FROM bgexec.job_event e JOIN bgexec.job j ON j.id = e.job_id
 WHERE e.job_id = :a AND e.seq = j.last_seq;
-- bad arguments: 22023 naming the field, nothing changed
SELECT sqlstate, regexp_replace(message, 'job [0-9]+', 'job N') AS message FROM try($$SELECT bgexec.reschedule(NULL, now())$$);
SELECT sqlstate, regexp_replace(message, 'job [0-9]+', 'job N') AS message FROM try(format('SELECT bgexec.reschedule(%s)', :a));
SELECT sqlstate, regexp_replace(message, 'job [0-9]+', 'job N') AS message FROM try(format('SELECT bgexec.reschedule(%s, %L)', :a, 'infinity'));
SELECT sqlstate, regexp_replace(message, 'job [0-9]+', 'job N') AS message FROM try(format('SELECT bgexec.reschedule(%s, %L)', :a, '-infinity'));
SELECT run_after - now() BETWEEN '2 h 59 min' AND '3 h' AS due_in_3h, priority, last_seq FROM bgexec.job WHERE id = :a;
-- not queued: running (b, claimed above), terminal, suspended: 55000 naming the status
SELECT sqlstate, regexp_replace(message, 'job [0-9]+', 'job N') AS message FROM try(format('SELECT bgexec.reschedule(%s, now())', :b));
SELECT bgexec.submit('noop', queue => 'rs') AS c \gset
SELECT bgexec.stop(:c);
SELECT sqlstate, regexp_replace(message, 'job [0-9]+', 'job N') AS message FROM try(format('SELECT bgexec.reschedule(%s, priority => 1)', :c));
RESET ROLE;
SELECT bgexec.submit('noop', queue => 'rs-s') AS s \gset
SELECT lease AS l FROM bgexec.claim('w-rs', '{rs-s}', 1) \gset
SELECT bgexec.finish(:s, :l, 'suspended', '{"step": "approve"}');
SELECT sqlstate, regexp_replace(message, 'job [0-9]+', 'job N') AS message FROM try(format('SELECT bgexec.reschedule(%s, now())', :s));
SELECT status, event_kinds(:s) FROM bgexec.job WHERE id = :s;
-- another tenant's job: does not exist for bob (P0002), unchanged
SET ROLE regress_bob;
SELECT sqlstate, regexp_replace(message, 'job [0-9]+', 'job N') AS message FROM try(format('SELECT bgexec.reschedule(%s, now())', :a));
RESET ROLE;
SELECT run_after - now() BETWEEN '2 h 59 min' AND '3 h' AS due_in_3h, priority FROM bgexec.job WHERE id = :a;
-- a worker role may not call it
SET ROLE regress_worker;
SELECT sqlstate, regexp_replace(message, 'job [0-9]+', 'job N') AS message FROM try(format('SELECT bgexec.reschedule(%s, now())', :a));
RESET ROLE;
-- and the administrator may move anyone's job
SELECT bgexec.reschedule(:a, priority => -1) IS NOT NULL AS moved;
SELECT priority FROM bgexec.job WHERE id = :a;
SELECT bgexec.stop(:a);
SELECT stats_mismatch();

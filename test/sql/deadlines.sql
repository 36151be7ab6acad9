-- deadlines: start of the attempt + timeout, on the DB clock; past it → timed_out.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
SELECT bgexec.submit('noop', queue => 'dl', timeout => '1 hour') AS j \gset
SELECT deadline BETWEEN now() + interval '59 minutes' AND now() + interval '61 minutes' AS deadline_set
  FROM bgexec.claim('w', '{dl}', 1);
SELECT bgexec.reconcile();
-- move the deadline into the past (as if an hour went by)
UPDATE bgexec.job SET deadline = now() - interval '1 second' WHERE id = :j;
SELECT bgexec.reconcile();
SELECT status, error->>'reason' AS reason, lease IS NULL AS released FROM bgexec.job WHERE id = :j;
SELECT event_kinds(:j), terminal_events(:j), gapless(:j);
-- the worker may report timed_out itself; a late completion is refused
SELECT bgexec.submit('noop', queue => 'dl', timeout => '5 minutes', max_attempts => 3) AS k \gset
SELECT lease AS l FROM bgexec.claim('w', '{dl}', 1) \gset
SELECT bgexec.finish(:k, :l, 'timed_out', '{"reason": "timeout"}');
SELECT bgexec.finish(:k, :l, 'completed', '{}') IS NULL AS late_refused;
SELECT status FROM bgexec.job WHERE id = :k;
-- A stop and the deadline both: whichever came first on the database clock
-- decides, on every path that ends the job: a stop requested before the
-- deadline → cancelled, at or after it → timed_out.  (reconcile made every
-- job past its deadline timed_out, a stop before it or not, while the
-- worker's finish said whichever it saw first.)
-- reconcile: the worker gone (a), or alive but still ending the steps (b,
-- c: the lease live, the deadline passed)
SELECT bgexec.submit('noop', queue => 'dls', timeout => '1 hour') AS a \gset
SELECT bgexec.submit('noop', queue => 'dls', timeout => '1 hour') AS b \gset
SELECT bgexec.submit('noop', queue => 'dls', timeout => '1 hour') AS c \gset
SELECT count(*) FROM bgexec.claim('w', '{dls}', 3);
SELECT count(bgexec.stop(id)) FROM bgexec.job WHERE id IN (:a, :b, :c);
UPDATE bgexec.job SET stop_requested_at = now() - interval '2 minutes', deadline = now() - interval '1 minute'
 WHERE id IN (:a, :b);
UPDATE bgexec.job SET deadline = now() - interval '2 minutes', stop_requested_at = now() - interval '1 minute'
 WHERE id = :c;
SELECT expire_lease(:a);
SELECT bgexec.reconcile() >= 3 AS reconciled;
SELECT CASE id WHEN :a THEN 'a' WHEN :b THEN 'b' ELSE 'c' END AS job, status,
       error->>'reason' AS reason, error->>'message' AS message, lease IS NULL AS released,
       event_kinds(id), gapless(id), terminal_events(id)
  FROM bgexec.job WHERE id IN (:a, :b, :c) ORDER BY id;
-- the worker's finish: it reports what it saw first (its deadline timer
-- runs on its own clock, a stop reaches it a round trip late); the
-- database's times decide, the worker's other keys kept
SELECT bgexec.submit('noop', queue => 'dlf', timeout => '1 hour') AS d \gset
SELECT bgexec.submit('noop', queue => 'dlf', timeout => '1 hour') AS e \gset
SELECT bgexec.submit('noop', queue => 'dlf', timeout => '1 hour') AS f \gset
SELECT bgexec.submit('noop', queue => 'dlf', timeout => '1 hour') AS g \gset
SELECT bgexec.submit('noop', queue => 'dlf', timeout => '1 hour') AS h \gset
SELECT count(*) FROM bgexec.claim('w', '{dlf}', 5);
SELECT count(bgexec.stop(id)) FROM bgexec.job WHERE id IN (:d, :e, :f, :g);
-- d, g: stopped before the deadline, which passed while the steps ended
UPDATE bgexec.job SET stop_requested_at = now() - interval '2 minutes', deadline = now() - interval '1 minute'
 WHERE id IN (:d, :g);
-- e: stopped after the deadline had passed; f: stopped, the deadline ahead
UPDATE bgexec.job SET deadline = now() - interval '2 minutes', stop_requested_at = now() - interval '1 minute'
 WHERE id = :e;
-- h: the deadline passed, then stop() (the worker still ending its steps)
UPDATE bgexec.job SET deadline = now() - interval '1 second' WHERE id = :h;
SELECT bgexec.stop(:h);
SELECT lease AS ld FROM bgexec.job WHERE id = :d \gset
SELECT lease AS le FROM bgexec.job WHERE id = :e \gset
SELECT lease AS lf FROM bgexec.job WHERE id = :f \gset
SELECT lease AS lg FROM bgexec.job WHERE id = :g \gset
SELECT lease AS lh FROM bgexec.job WHERE id = :h \gset
SELECT bgexec.finish(:d, :ld, 'timed_out', '{"reason": "timeout", "message": "job exceeded its timeout", "ended": ["s"]}') AS d,
       bgexec.finish(:e, :le, 'cancelled', '{"reason": "stopped", "message": "stopped on request", "ended": ["s"]}') AS e,
       bgexec.finish(:f, :lf, 'cancelled', '{"reason": "stopped", "message": "stopped on request"}') AS f,
       (SELECT status FROM bgexec.finish_many(jsonb_build_array(jsonb_build_object(
          'job_id', :g, 'lease', :lg, 'outcome', 'timed_out', 'body', '"not an object"'::jsonb)))) AS g,
       bgexec.finish(:h, :lh, 'cancelled', NULL) AS h;
SELECT CASE id WHEN :d THEN 'd' WHEN :e THEN 'e' WHEN :f THEN 'f' WHEN :g THEN 'g' ELSE 'h' END AS job, status,
       error, event_kinds(id), gapless(id), terminal_events(id)
  FROM bgexec.job WHERE id IN (:d, :e, :f, :g, :h) ORDER BY id;
-- a tie, the stop at the deadline itself: timed_out (at or after it), by the
-- worker's finish (t1) and by reconcile (t2)
SELECT bgexec.submit('noop', queue => 'dlt', timeout => '1 hour') AS t1 \gset
SELECT bgexec.submit('noop', queue => 'dlt', timeout => '1 hour') AS t2 \gset
SELECT count(*) FROM bgexec.claim('w', '{dlt}', 2);
SELECT count(bgexec.stop(id)) FROM bgexec.job WHERE id IN (:t1, :t2);
UPDATE bgexec.job SET stop_requested_at = now() - interval '1 minute', deadline = now() - interval '1 minute'
 WHERE id IN (:t1, :t2);
SELECT lease AS lt1 FROM bgexec.job WHERE id = :t1 \gset
SELECT bgexec.finish(:t1, :lt1, 'cancelled', NULL) AS finish_at_deadline;
SELECT expire_lease(:t2);
SELECT bgexec.reconcile() >= 1 AS reconciled;
SELECT status FROM bgexec.job WHERE id = :t2;
-- snooze (a worker gives a sleeping job back): a stop before the deadline
-- cancels (k), one after it (i) or none (j) past the deadline times out,
-- where the job went back queued, its timeout counted anew by the next run
SELECT bgexec.submit('workflow', '{"steps": [{"id": "z", "sleep": 100}]}', queue => 'dlz', timeout => '1 hour') AS i \gset
SELECT bgexec.submit('workflow', '{"steps": [{"id": "z", "sleep": 100}]}', queue => 'dlz', timeout => '1 hour') AS j \gset
SELECT bgexec.submit('workflow', '{"steps": [{"id": "z", "sleep": 100}]}', queue => 'dlz', timeout => '1 hour') AS k \gset
SELECT count(*) FROM bgexec.claim('w', '{dlz}', 3);
SELECT count(bgexec.append_events(id, lease, '[{"kind": "step_started", "data": {"step": "z"}}]'))
  FROM bgexec.job WHERE id IN (:i, :j, :k);
SELECT count(bgexec.stop(id)) FROM bgexec.job WHERE id IN (:i, :k);
UPDATE bgexec.job SET deadline = now() - interval '2 minutes', stop_requested_at = now() - interval '1 minute'
 WHERE id = :i;
UPDATE bgexec.job SET deadline = now() - interval '1 minute' WHERE id = :j;
UPDATE bgexec.job SET stop_requested_at = now() - interval '2 minutes', deadline = now() - interval '1 minute'
 WHERE id = :k;
SELECT CASE id WHEN :i THEN 'i' WHEN :j THEN 'j' ELSE 'k' END AS job,
       bgexec.snooze(id, lease, '{"z": 100}') AS snoozed
  FROM bgexec.job WHERE id IN (:i, :j, :k) ORDER BY id;
-- (the worker's: no attempt in the error, which GET /metrics counts as the
-- watchdog's timeouts)
SELECT CASE id WHEN :i THEN 'i' WHEN :j THEN 'j' ELSE 'k' END AS job, status, error->>'reason' AS reason,
       error ? 'attempt' AS names_attempt, event_kinds(id), gapless(id), terminal_events(id)
  FROM bgexec.job WHERE id IN (:i, :j, :k) ORDER BY id;
-- a queued job has no deadline (each run's starts at its claim): stop cancels it
SELECT bgexec.submit('noop', queue => 'dlq', timeout => '1 second') AS q \gset
SELECT bgexec.stop(:q), (SELECT deadline IS NULL FROM bgexec.job WHERE id = :q) AS no_deadline;
-- no timeout: no deadline
SELECT bgexec.submit('noop', queue => 'dl') AS n \gset
SELECT deadline IS NULL AS no_deadline FROM bgexec.claim('w', '{dl}', 1);
-- negative: a non-positive timeout (0 is none: queue_defaults)
SELECT bgexec.submit('noop', timeout => '1 mon -30 days');
SELECT bgexec.submit('noop', timeout => '-1 minute');

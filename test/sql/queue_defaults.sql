-- queue_defaults: configure_queue's default_max_attempts and default_timeout,
-- given to a job submitted to the queue without its own (submit, submit_many
-- on both of its paths, a schedule's tick, run_schedule); bad values refused
-- naming the field; only an administrator configures a queue.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
-- without a row or a default: max_attempts 1 (at most once), no timeout
SELECT bgexec.submit('noop', queue => 'qd') AS a \gset
SELECT max_attempts, timeout FROM bgexec.job WHERE id = :a;
SELECT name, default_max_attempts, default_timeout
  FROM bgexec.configure_queue('qd', default_max_attempts => 20, default_timeout => '10 minutes');
-- the queue's defaults for a job naming none; the job's own when it names one
SELECT bgexec.submit('noop', queue => 'qd') AS b \gset
SELECT bgexec.submit('noop', queue => 'qd', max_attempts => NULL, timeout => NULL) AS c \gset
SELECT bgexec.submit('noop', queue => 'qd', max_attempts => 1, timeout => '5 s') AS d \gset
SELECT bgexec.submit('noop', queue => 'qd-other') AS e \gset
SELECT id = :b AS b, id = :c AS c, id = :d AS d, id = :e AS e, max_attempts, timeout
  FROM bgexec.job WHERE id IN (:b, :c, :d, :e) ORDER BY id;
-- the slow path (an idempotency key) and the capped path take them too
SELECT bgexec.submit('noop', queue => 'qd', idempotency_key => 'qd-1') AS f \gset
SELECT max_attempts, timeout FROM bgexec.job WHERE id = :f;
SELECT name, max_queued FROM bgexec.configure_queue('qd-capped', max_queued => 100, default_max_attempts => 3);
SELECT bgexec.submit('noop', queue => 'qd-capped') AS g \gset
SELECT max_attempts, timeout FROM bgexec.job WHERE id = :g;
-- submit_many: set-based (per element, by its own queue), per element (a key)
SELECT array_agg(id) AS ids FROM bgexec.submit_many('[{"kind": "noop", "queue": "qd"},
                            {"kind": "noop", "queue": "qd", "max_attempts": 2, "timeout": "1 s"},
                            {"kind": "noop", "queue": "qd-other"},
                            {"kind": "noop", "queue": "qd", "max_attempts": null}]') AS s(id) \gset
SELECT id - min(id) OVER () AS element, max_attempts, timeout FROM bgexec.job WHERE id = ANY (:'ids') ORDER BY id;
SELECT array_agg(id) AS ids FROM bgexec.submit_many('[{"kind": "noop", "queue": "qd-capped"},
                            {"kind": "noop", "queue": "qd"}]') AS s(id) \gset
SELECT id - min(id) OVER () AS element, max_attempts, timeout FROM bgexec.job WHERE id = ANY (:'ids') ORDER BY id;
SELECT array_agg(id) AS ids FROM bgexec.submit_many('[{"kind": "noop", "queue": "qd", "idempotency_key": "qd-2"},
                            {"kind": "noop", "queue": "qd-other", "idempotency_key": "qd-3"},
                            {"kind": "noop", "queue": "qd", "max_attempts": 4, "idempotency_key": "qd-4"}]') AS s(id) \gset
SELECT id - min(id) OVER () AS element, max_attempts, timeout FROM bgexec.job WHERE id = ANY (:'ids') ORDER BY id;
-- a schedule without its own takes the queue's defaults when it fires, as they are then
SET ROLE regress_alice;
SELECT bgexec.schedule('qd-tick', '0 3 * * *', 'noop', queue => 'qd') IS NOT NULL AS scheduled;
SELECT bgexec.schedule('qd-own', '0 3 * * *', 'noop', queue => 'qd', max_attempts => 2) IS NOT NULL AS scheduled;
SELECT name, max_attempts, timeout FROM bgexec.schedule WHERE name LIKE 'qd-%' ORDER BY name;
SELECT bgexec.run_schedule('qd-tick') AS h \gset
SELECT max_attempts, timeout FROM bgexec.job WHERE id = :h;
RESET ROLE;
SELECT name, default_max_attempts FROM bgexec.configure_queue('qd', default_max_attempts => 7);
UPDATE bgexec.schedule SET next_run_at = now() - interval '1 minute' WHERE name LIKE 'qd-%';
SELECT bgexec.reconcile() >= 0 AS reconciled;
SELECT s.name, j.max_attempts, j.timeout FROM bgexec.schedule s JOIN bgexec.job j ON j.id = s.last_job_id
 WHERE s.name LIKE 'qd-%' ORDER BY s.name;
-- NULL keeps a default; 1 removes default_max_attempts (what a job gets without one)
SELECT name, default_max_attempts, default_timeout FROM bgexec.configure_queue('qd', paused => false);
SELECT name, default_max_attempts, default_timeout FROM bgexec.configure_queue('qd', default_max_attempts => 1);
SELECT bgexec.submit('noop', queue => 'qd') AS i \gset
SELECT max_attempts, timeout FROM bgexec.job WHERE id = :i;
-- and 0 removes default_timeout (a job's own timeout of 0 is none)
SELECT name, default_max_attempts, default_timeout FROM bgexec.configure_queue('qd', default_timeout => '0');
SELECT bgexec.submit('noop', queue => 'qd') AS i \gset
SELECT max_attempts, timeout FROM bgexec.job WHERE id = :i;
SELECT name, default_max_attempts, default_timeout FROM bgexec.configure_queue('qd', default_timeout => '10 minutes');
-- bad defaults: 22023 naming the field, nothing changed (not even a new row)
SELECT * FROM try($$SELECT bgexec.configure_queue('qd', default_max_attempts => 0)$$);
SELECT * FROM try($$SELECT bgexec.configure_queue('qd', default_max_attempts => -1)$$);
SELECT * FROM try($$SELECT bgexec.configure_queue('qd', default_timeout => '-5 minutes')$$);
SELECT * FROM try($$SELECT bgexec.configure_queue('qd', default_timeout => '1 mon -29 days')$$);
SELECT * FROM try($$SELECT bgexec.configure_queue('qd', default_timeout => '101 years')$$);
SELECT * FROM try($$SELECT bgexec.configure_queue('qd-new', default_max_attempts => 0)$$);
SELECT count(*) AS new_rows FROM bgexec.queue WHERE name = 'qd-new';
SELECT name, default_max_attempts, default_timeout FROM bgexec.queue WHERE name = 'qd';
-- and past the function, the table's constraint
SELECT * FROM try($$UPDATE bgexec.queue SET default_max_attempts = 0 WHERE name = 'qd'$$);
-- a job's own max_attempts below 1 is still refused, with or without a default
SELECT * FROM try($$SELECT bgexec.submit('noop', queue => 'qd', max_attempts => 0)$$);
SELECT * FROM try($$SELECT bgexec.submit_many('[{"kind": "noop", "queue": "qd", "max_attempts": 0}]')$$);
-- a job's timeout of 0: no timeout, whatever the queue's default, on every
-- path (submit's common one, an idempotency or unique key, a capped queue,
-- submit_many set-based and per element, a schedule's tick and run_schedule)
SELECT name, default_timeout FROM bgexec.configure_queue('qd-capped', default_timeout => '1 hour');
SELECT bgexec.submit('noop', queue => 'qd', timeout => '0') AS z1 \gset
SELECT bgexec.submit('noop', queue => 'qd', timeout => '0 days', idempotency_key => 'qd-z2') AS z2 \gset
SELECT bgexec.submit('noop', queue => 'qd', timeout => '0 s', unique_key => 'qd-z3') AS z3 \gset
SELECT bgexec.submit('noop', queue => 'qd-capped', timeout => '0') AS z4 \gset
SELECT bgexec.submit('noop', queue => 'qd-capped') AS z5 \gset
SELECT id = :z1 AS z1, id = :z2 AS z2, id = :z3 AS z3, id = :z4 AS z4, id = :z5 AS own_default, timeout
  FROM bgexec.job WHERE id IN (:z1, :z2, :z3, :z4, :z5) ORDER BY id;
SELECT array_agg(id) AS ids FROM bgexec.submit_many('[{"kind": "noop", "queue": "qd", "timeout": "0"},
                            {"kind": "noop", "queue": "qd"},
                            {"kind": "noop", "queue": "qd", "timeout": "00:00:00"}]') AS s(id) \gset
SELECT id - min(id) OVER () AS element, timeout FROM bgexec.job WHERE id = ANY (:'ids') ORDER BY id;
SELECT array_agg(id) AS ids FROM bgexec.submit_many('[{"kind": "noop", "queue": "qd-capped", "timeout": "0"},
                            {"kind": "noop", "queue": "qd", "timeout": "0", "idempotency_key": "qd-z6"},
                            {"kind": "noop", "queue": "qd"}]') AS s(id) \gset
SELECT id - min(id) OVER () AS element, timeout FROM bgexec.job WHERE id = ANY (:'ids') ORDER BY id;
SET ROLE regress_alice;
SELECT bgexec.schedule('qd-none', '0 3 * * *', 'noop', queue => 'qd', timeout => '0') IS NOT NULL AS scheduled;
SELECT name, timeout FROM bgexec.schedule WHERE name = 'qd-none';
SELECT bgexec.run_schedule('qd-none') AS z7 \gset
SELECT timeout FROM bgexec.job WHERE id = :z7;
RESET ROLE;
UPDATE bgexec.schedule SET next_run_at = now() - interval '1 minute' WHERE name = 'qd-none';
SELECT bgexec.reconcile() >= 0 AS reconciled;
SELECT s.name, j.id <> :z7 AS ticked, j.timeout FROM bgexec.schedule s JOIN bgexec.job j ON j.id = s.last_job_id
 WHERE s.name = 'qd-none';
-- zero in every part: '1 mon -30 days' compares equal to 0 but is not, and
-- is refused as any other non-positive timeout (22023 naming the field)
SELECT * FROM try($$SELECT bgexec.submit('noop', queue => 'qd', timeout => '1 mon -30 days')$$);
SELECT * FROM try($$SELECT bgexec.submit('noop', queue => 'qd', timeout => '1 day -24 hours', idempotency_key => 'qd-z8')$$);
SELECT * FROM try($$SELECT bgexec.submit_many('[{"kind": "noop", "queue": "qd", "timeout": "1 mon -30 days"}]')$$);
SELECT * FROM try($$SELECT bgexec.configure_queue('qd', default_timeout => '1 mon -30 days')$$);
SELECT name, default_timeout FROM bgexec.queue WHERE name = 'qd';
-- who may configure a queue stays as it was: not a client
SET ROLE regress_alice;
SELECT * FROM try($$SELECT bgexec.configure_queue('qd', default_max_attempts => 5)$$);
SELECT bgexec.unschedule('qd-tick') AND bgexec.unschedule('qd-own') AND bgexec.unschedule('qd-none') AS unscheduled;
RESET ROLE;
SELECT stats_mismatch();

-- unclaim: the jobs of a claim whose reply the worker never received go back
-- to the queue, their attempt given back; nothing else of the worker's, and
-- nothing of another worker's or of an earlier run of the same worker id.
\set SHOW_CONTEXT never
SELECT bgexec.register_worker('uw', '{uc}', 4);
-- a job whose claim reply arrived, then one whose claim reply was lost
SELECT bgexec.submit('noop', queue => 'uc', run_after => now() - interval '1 minute') AS got \gset
SELECT lease AS lg FROM bgexec.claim('uw', '{uc}', 1) \gset
SELECT bgexec.submit('noop', queue => 'uc', run_after => now() - interval '30 seconds') AS lost \gset
SELECT bgexec.submit('noop', queue => 'uc', run_after => now() - interval '30 seconds') AS stopped \gset
SELECT run_after AS lost_run_after FROM bgexec.job WHERE id = :lost \gset
SELECT count(*) FROM bgexec.claim('uw', '{uc}', 2);
-- the client asks to stop one of them meanwhile
SELECT bgexec.stop(:stopped);
-- the worker then received another claim's reply (held), and another worker has a job
SELECT bgexec.submit('noop', queue => 'uc') AS later \gset
SELECT lease AS ll FROM bgexec.claim('uw', '{uc}', 1) \gset
SELECT bgexec.submit('noop', queue => 'uc') AS other \gset
SELECT count(*) FROM bgexec.claim('ux', '{uc}', 1);
-- (a claim of this worker still running: NULL, see isolation claim-vs-unclaim)
SELECT id = :got AS got, id = :later AS later, status, attempt
  FROM bgexec.job WHERE queue = 'uc' ORDER BY id;
-- a NULL in held is refused (it made every job "held": 0 given back, as
-- success); so is a NULL list (read as none held, it gave back the jobs the
-- worker runs)
\set VERBOSITY terse
SELECT bgexec.unclaim('uw', :lg, ARRAY[:ll, NULL]::bigint[]);
SELECT bgexec.unclaim('uw', :lg, NULL);
SELECT bgexec.unclaim('uw', :lg, '{{1},{2}}'::bigint[]);
\set VERBOSITY default
-- a worker waits for the queue meanwhile
SELECT jobs FROM bgexec.await_work('uwait', '{uc}', 1, '0');  -- registers the waiter
-- after_lease = the last lease received before the lost claim; held = those since
SELECT bgexec.unclaim('uw', :lg, ARRAY[:ll]::bigint[]) AS unclaimed;
-- the job given back wakes it
SELECT jobs AS woken FROM bgexec.await_work('uwait', '{uc}', 1, '0');
SELECT id = :got AS got, id = :lost AS lost, id = :stopped AS stopped,
       id = :later AS later, id = :other AS other, status, attempt, lease IS NULL AS no_lease,
       error->>'reason' AS reason
  FROM bgexec.job WHERE queue = 'uc' ORDER BY id;
-- the lost job keeps its place in the queue and its log says why it went back
SELECT run_after = :'lost_run_after' AS same_run_after FROM bgexec.job WHERE id = :lost;
SELECT event_kinds(:lost), gapless(:lost), event_kinds(:stopped), terminal_events(:stopped);
SELECT data->'error'->>'reason' AS reason, data->>'attempt' AS attempt, data->>'delay_ms' AS delay_ms
  FROM bgexec.job_event WHERE job_id = :lost AND kind = 'retry_scheduled';
-- claimed again, it runs as attempt 1 (at-most-once jobs included)
SELECT job_id AS relost, attempt, lease AS lr FROM bgexec.claim('uw', '{uc}', 1) \gset
SELECT :relost = :lost AS lost, :attempt AS attempt;
-- a second call, holding that lease too, finds nothing; an unknown worker has nothing
SELECT bgexec.unclaim('uw', :lg, ARRAY[:ll, :lr]::bigint[]) AS again,
       bgexec.unclaim('nobody', 0) AS unknown_worker;
-- a job claimed by an earlier run of the same worker id, before it registered
-- again, may have started: not given back, even with after_lease 0 (the
-- registration a second after the claim; then a second before it)
SELECT bgexec.register_worker('uv', '{uv}', 1);
SELECT bgexec.submit('noop', queue => 'uv') AS earlier \gset
SELECT count(*) FROM bgexec.claim('uv', '{uv}', 1);
UPDATE bgexec.worker SET started_at = (SELECT started_at FROM bgexec.job WHERE id = :earlier) + interval '1 second'
 WHERE id = 'uv';
SELECT bgexec.unclaim('uv', 0) AS earlier_run;
UPDATE bgexec.worker SET started_at = (SELECT started_at FROM bgexec.job WHERE id = :earlier) - interval '1 second'
 WHERE id = 'uv';
SELECT bgexec.unclaim('uv', 0) AS this_run;
-- bad input: a clear error naming the argument, nothing changed
SELECT * FROM try($$SELECT bgexec.unclaim('', 0)$$);
SELECT * FROM try($$SELECT bgexec.unclaim(NULL, 0)$$);
SELECT * FROM try($$SELECT bgexec.unclaim('uw', NULL)$$);
-- process (the caller, as register_worker's info names it): an object with
-- a string host and an integer pid, else 22023 naming it; a process the
-- worker row does not name is refused (55006, isolation takeover-claim)
SELECT * FROM try($$SELECT bgexec.unclaim('uw', 0, '{}', '[]')$$);
SELECT * FROM try($$SELECT bgexec.unclaim('uw', 0, '{}', '{"host": "h", "pid": "1"}')$$);
SELECT * FROM try($$SELECT bgexec.claim('uw', '{uc}', 1, '30 s', '{"host": 1, "pid": 1}')$$);
SELECT * FROM try($$SELECT bgexec.claim('uw', '{uc}', 1, '30 s', '{"host": "h", "pid": 1.5}')$$);
SELECT * FROM try($$SELECT bgexec.await_claim('uw', '{uc}', 1, '0 s', '30 s', false, NULL, '{"host": "h"}')$$);
-- ... whatever max_jobs is (0: a worker busy with a backlog waits without
-- claiming; its process was not checked then)
SELECT * FROM try($$SELECT bgexec.await_claim('uw', '{uc}', 1, '0 s', '30 s', false, 0, '"garbage"')$$);
SELECT * FROM try($$SELECT bgexec.await_claim('uw', '{uc}', 0, '0 s', '30 s', false, NULL, '[1, 2]')$$);
SELECT bgexec.register_worker('up', '{up}', 1, '{"host": "h", "pid": 7}');
SELECT bgexec.submit('noop', queue => 'up') IS NOT NULL AS submitted;
SELECT * FROM try($$SELECT bgexec.claim('up', '{up}', 1, '30 s', '{"host": "h", "pid": 8}')$$);
SELECT * FROM try($$SELECT bgexec.claim('up', '{up}', 1, '30 s', '{"host": "h2", "pid": 7}')$$);
-- the pid as register_worker reads it: 7.0 is pid 7; past int's range refused
SELECT count(*) AS claimed_as_7_0 FROM bgexec.claim('up', '{up}', 1, '30 s', '{"host": "h", "pid": 7.0}');
SELECT bgexec.unclaim('up', 0, '{}', '{"host": "h", "pid": 7.0}') AS unclaimed_as_7_0;
SELECT * FROM try($$SELECT bgexec.claim('up', '{up}', 1, '30 s', '{"host": "h", "pid": 4294967303}')$$);
SELECT * FROM try($$SELECT bgexec.claim('up', '{up}', 1, '30 s', '{"host": "h", "pid": 7e400}')$$);
SELECT count(*) AS claimed FROM bgexec.claim('up', '{up}', 1, '30 s', '{"host": "h", "pid": 7}');
SELECT bgexec.unclaim('up', 0, '{}', '{"host": "h", "pid": 7}') AS unclaimed;
-- reason cannot_start_steps: a job the worker received, whose step its
-- host could not start, goes back the same way, the log saying why; the
-- other lease of the worker above after_lease is held and stays running
SELECT bgexec.register_worker('us', '{us}', 2);
SELECT bgexec.submit('noop', queue => 'us') AS spawnless \gset
SELECT bgexec.submit('noop', queue => 'us') AS beside \gset
SELECT lease AS ls FROM bgexec.claim('us', '{us}', 1) \gset
SELECT lease AS lb FROM bgexec.claim('us', '{us}', 1) \gset
SELECT bgexec.append_event(:spawnless, :ls, 'step_started', '{"step": "s"}') IS NOT NULL AS step_started;
SELECT bgexec.append_event(:spawnless, :ls, 'step_failed', '{"step": "s"}') IS NOT NULL AS step_failed;
SELECT bgexec.unclaim('us', :ls - 1, ARRAY[:lb], NULL, 'cannot_start_steps') AS given_back;
SELECT id = :spawnless AS spawnless, status, attempt FROM bgexec.job WHERE queue = 'us' ORDER BY id;
SELECT event_kinds(:spawnless), gapless(:spawnless);
SELECT data->'error'->>'reason' AS reason, data->'error'->>'message' AS message
  FROM bgexec.job_event WHERE job_id = :spawnless AND kind = 'retry_scheduled';
-- bounded: a step whose own start fails while the worker's probe starts
-- (ENOMEM for that program) was given back for ever, never counted.  Ten
-- give-backs in a row, then the next counts the attempt: retried (the
-- queue's backoff passed over; max_attempts 2), and the count starts again for the
-- second attempt, which ends failed.
SELECT bgexec.configure_queue('ub', retry_base => '1 ms', retry_cap => '1 ms');
SELECT bgexec.register_worker('ub', '{ub}', 1);
SELECT bgexec.submit('noop', queue => 'ub', max_attempts => 2) AS stuck \gset
CREATE FUNCTION cannot_start(n int) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE c record; s text := '';
BEGIN
	FOR i IN 1..n LOOP
		UPDATE bgexec.job x SET run_after = now() WHERE x.queue = 'ub' AND x.status = 'queued';  -- the backoff
		SELECT x.job_id, x.lease INTO c FROM bgexec.claim('ub', '{ub}', 1) x;
		IF c.lease IS NULL THEN RETURN s || 'none claimed'; END IF;
		PERFORM bgexec.append_event(c.job_id, c.lease, 'step_started', '{"step": "s"}');
		PERFORM bgexec.append_event(c.job_id, c.lease, 'step_failed',
		          '{"step": "s", "error": {"step": "s", "message": "cannot start big: Cannot allocate memory", "retryable": true, "reason": "cannot_start_steps"}}');
		PERFORM bgexec.unclaim('ub', c.lease - 1, '{}', NULL, 'cannot_start_steps');
		s := s || (SELECT x.status::text || x.attempt FROM bgexec.job x WHERE x.id = c.job_id) || ' ';
	END LOOP;
	RETURN rtrim(s);
END $f$;
SELECT cannot_start(11) AS first_attempt;
SELECT status, attempt, error->>'reason' AS reason, error->>'given_back' AS given_back,
       error->>'retryable' AS retryable, error->>'step' AS step, error->>'message' AS message
  FROM bgexec.job WHERE id = :stuck;
SELECT cannot_start(11) AS second_attempt;
SELECT status, attempt, error->>'given_back' AS given_back, error->>'message' AS message
  FROM bgexec.job WHERE id = :stuck;
SELECT count(*) FILTER (WHERE data->'error' ? 'given_back') AS counted,
       count(*) FILTER (WHERE NOT data->'error' ? 'given_back') AS given_back
  FROM bgexec.job_event WHERE job_id = :stuck AND kind = 'retry_scheduled';
SELECT gapless(:stuck);
-- the count is of give-backs in a row: another requeue between them (a
-- claim reply lost) starts it again
SELECT bgexec.submit('noop', queue => 'ub', max_attempts => 2) AS again \gset
SELECT cannot_start(9) AS nine;
SELECT lease AS lr FROM bgexec.claim('ub', '{ub}', 1) \gset
SELECT bgexec.unclaim('ub', :lr - 1, '{}', NULL, 'claim_reply_lost') AS reply_lost;
SELECT cannot_start(10) AS ten_more;
SELECT status, attempt, error->>'given_back' AS given_back FROM bgexec.job WHERE id = :again;
SELECT cannot_start(1) AS the_eleventh;
SELECT status, attempt, error->>'given_back' AS given_back FROM bgexec.job WHERE id = :again;
DROP FUNCTION cannot_start(int);
-- any other reason (or none) is refused, nothing changed
SELECT * FROM try($$SELECT bgexec.unclaim('us', 0, '{}', NULL, 'host_on_fire')$$);
SELECT * FROM try($$SELECT bgexec.unclaim('us', 0, '{}', NULL, NULL)$$);
SELECT count(*) AS finished FROM bgexec.job j, bgexec.finish(j.id, j.lease, 'completed')
 WHERE j.queue = 'us' AND j.status = 'running';
-- workers only
SET ROLE regress_alice;
SELECT * FROM try($$SELECT bgexec.unclaim('uw', 0)$$);
RESET ROLE;
SELECT stats_mismatch();
SELECT count(*) AS finished FROM bgexec.job j, bgexec.finish(j.id, j.lease, 'completed')
 WHERE j.queue = 'uc' AND j.status = 'running';

-- suspend/resume: an approval step releases the lease; resume re-queues without using an attempt.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
SELECT bgexec.submit('workflow', '{"steps": [{"id": "gate", "approval": {"prompt": "go?"}}, {"id": "after", "needs": ["gate"], "sleep": 0}]}', queue => 'sus') AS j \gset
SELECT lease AS l, attempt FROM bgexec.claim('w', '{sus}', 1) \gset
SELECT bgexec.append_event(:j, :l, 'step_started', '{"step": "gate"}');
SELECT bgexec.finish(:j, :l, 'suspended', '{"step": "gate", "prompt": "go?"}');
SELECT status, lease IS NULL AS released, attempt FROM bgexec.job WHERE id = :j;
-- the old lease is dead
SELECT action FROM bgexec.heartbeat('w', ARRAY[:l]::bigint[]);
SELECT bgexec.append_event(:j, :l, 'log', '{}') IS NULL AS refused;
-- suspended jobs are not claimable and not reconciled
SELECT count(*) FROM bgexec.claim('w', '{sus}', 1);
SELECT bgexec.reconcile();
-- an input over bgexec.max_payload_bytes (54000), or with a number no
-- double holds (22003: the worker could not read the job's steps again, and
-- every later run failed), changes nothing
SET bgexec.max_payload_bytes = 1024;
SELECT bgexec.resume(:j, jsonb_build_object('big', repeat('x', 2000)));
-- ... counted as the worker reads it, not as stored: from a table it is
-- compressed (about 250 bytes here), and passed
CREATE TEMP TABLE big_input AS SELECT jsonb_build_object('big', repeat('x', 20000)) AS j;
SELECT pg_column_size(j) < 1024 AS compressed FROM big_input;
SELECT bgexec.resume(:j, j) FROM big_input;
RESET bgexec.max_payload_bytes;
SELECT bgexec.resume(:j, '{"v": [1, {"w": 1e400}]}');
SELECT bgexec.resume(:j, '-1e309');
-- nested deeper than the worker reads (512 levels, 54000): 512 is the most
SELECT bgexec.resume(:j, ('{"a": ' || repeat('[', 512) || repeat(']', 512) || '}')::jsonb);
SELECT status FROM bgexec.job WHERE id = :j;
-- resume: the input becomes the approval step's output
SELECT bgexec.resume(:j, '{"approved": true}');
SELECT bgexec.resume(:j, '{"approved": true}');  -- not suspended any more: false
SELECT status FROM bgexec.job WHERE id = :j;
SELECT attempt, completed_steps FROM bgexec.claim('w', '{sus}', 1);
SELECT event_kinds(:j), gapless(:j);
SELECT data - 'by' AS resumed FROM bgexec.job_event WHERE job_id = :j AND kind = 'resumed';
-- a suspended job can be stopped
SELECT bgexec.submit('workflow', '{"steps": [{"id": "g", "approval": true}]}', queue => 'sus') AS k \gset
SELECT lease AS l FROM bgexec.claim('w', '{sus}', 1) \gset
SELECT bgexec.finish(:k, :l, 'suspended', '{"step": "g"}');
SELECT bgexec.stop(:k);
SELECT bgexec.resume(:k);
-- a JSON null body is no body, as SQL's NULL: the suspended event's data is
-- {} (it was null, where readers look up data.step), a failure's error is
-- no JSON null
SELECT count(bgexec.submit('noop', queue => 'sus-null')) FROM generate_series(1, 2);
SELECT array_agg(job_id ORDER BY job_id) AS ks, array_agg(lease ORDER BY job_id) AS ls FROM bgexec.claim('w', '{sus-null}', 2) \gset
SELECT bgexec.finish((:'ks'::bigint[])[1], (:'ls'::bigint[])[1], 'suspended', 'null');
SELECT status FROM bgexec.finish_many(jsonb_build_array(jsonb_build_object('job_id', (:'ks'::bigint[])[2], 'lease', (:'ls'::bigint[])[2],
                                                                      'outcome', 'failed', 'body', null)));
SELECT j.id = (:'ks'::bigint[])[1] AS first, j.status, j.error IS NULL AS no_error, e.data
  FROM bgexec.job j JOIN bgexec.job_event e ON e.job_id = j.id AND e.seq = j.last_seq
 WHERE j.id = ANY (:'ks'::bigint[]) ORDER BY j.id;
-- completed steps of earlier runs are handed to the next run
SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 0}, {"id": "b", "needs": ["a"], "sleep": 0}]}', queue => 'sus', max_attempts => 2) AS m \gset
SELECT lease AS l FROM bgexec.claim('w', '{sus}', 1) \gset
SELECT bgexec.append_event(:m, :l, 'step_completed', '{"step": "a", "output": {"n": 1}, "stdout": "{\"n\": 1}\n"}');
SELECT bgexec.finish(:m, :l, 'failed', '{"message": "b broke"}');
UPDATE bgexec.job SET run_after = now() WHERE id = :m;
SELECT attempt, completed_steps, completed_stdout FROM bgexec.claim('w', '{sus}', 1);
-- a step's newest step_completed decides: without a stdout (its output is the
-- text) an older event's stdout is not handed on
SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 0}]}', queue => 'sus', max_attempts => 2) AS m \gset
SELECT lease AS l FROM bgexec.claim('w', '{sus}', 1) \gset
SELECT bgexec.append_event(:m, :l, 'step_completed', '{"step": "a", "output": {"n": 1}, "stdout": "{ \"n\": 1 }"}') IS NOT NULL AS appended;
SELECT bgexec.append_event(:m, :l, 'step_completed', '{"step": "a", "output": "two"}') IS NOT NULL AS appended;
SELECT bgexec.finish(:m, :l, 'failed', '{"message": "b broke"}');
UPDATE bgexec.job SET run_after = now() WHERE id = :m;
SELECT attempt, completed_steps, completed_stdout FROM bgexec.claim('w', '{sus}', 1);
-- a step event must name its step: a null one made every claim of the
-- queue fail (a null key for completed_steps)
SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 0}]}', queue => 'sus', max_attempts => 2) AS m \gset
SELECT lease AS l FROM bgexec.claim('w', '{sus}', 1) \gset
SELECT bgexec.append_event(:m, :l, 'step_completed', '{"step": null, "output": 1}');
SELECT bgexec.append_events(:m, :l, '[{"kind": "log", "data": {}}, {"kind": "step_started", "data": {"step": 5}}]');
SELECT bgexec.append_event(:m, :l, 'step_failed', '{"step": ""}');
SELECT bgexec.append_event(:m, :l, 'step_started');
SELECT bgexec.append_event(:m, :l, 'step_completed', '{"step": "a", "output": 2}') IS NOT NULL AS appended;
-- and one written around append_events (by hand, as a superuser) is left
-- out, not fatal to the queue's claims
INSERT INTO bgexec.job_event (job_id, seq, kind, data)
SELECT :m, last_seq + g, 'step_completed', d
  FROM bgexec.job, LATERAL (VALUES (1, '{"step": null, "output": 3}'::jsonb),
                                   (2, '{"step": 7, "output": 4, "stdout": "x"}')) v(g, d)
 WHERE id = :m;
UPDATE bgexec.job SET last_seq = last_seq + 2 WHERE id = :m;
SELECT bgexec.finish(:m, :l, 'failed', '{"message": "retry"}');
UPDATE bgexec.job SET run_after = now() WHERE id = :m;
SELECT attempt, completed_steps, completed_stdout FROM bgexec.claim('w', '{sus}', 1);
-- completed steps past what one jsonb holds (17 outputs of 16 MB: 256 MiB)
-- made every claim of the queue fail, the job queued at its head for ever
-- and the jobs behind it never claimed: the claim now gives the job a
-- string saying why (the worker fails the job with it) and goes on
SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 0}]}', queue => 'sus-big', max_attempts => 2) AS m \gset
SELECT lease AS l FROM bgexec.claim('w', '{sus-big}', 1) \gset
SELECT count(bgexec.append_event(:m, :l, 'step_completed',
                                 jsonb_build_object('step', 's' || i, 'output', repeat('x', 16000000))))
  FROM generate_series(1, 17) i;
SELECT bgexec.finish(:m, :l, 'failed', '{"message": "retry"}');
UPDATE bgexec.job SET run_after = now() WHERE id = :m;
SELECT bgexec.submit('noop', queue => 'sus-big') AS behind \gset
SELECT job_id = :m AS poisoned, jsonb_typeof(completed_steps) AS steps, left(completed_steps #>> '{}', 70) AS why,
       completed_stdout
  FROM bgexec.claim('w', '{sus-big}', 10) ORDER BY job_id;
-- negative: resume of a job that does not exist
SELECT bgexec.resume(-1);
-- negative: a null job id names no job (22023)
SELECT bgexec.resume(NULL);

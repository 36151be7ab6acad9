-- events: gapless seq per job, replay after a cursor, NOTIFY bgexec_events "job:seq".
\set SHOW_CONTEXT never
SELECT bgexec.submit('noop', queue => 'ev') AS j \gset
SELECT lease AS l FROM bgexec.claim('w', '{ev}', 1) \gset
SELECT bgexec.append_events(:j, :l, (SELECT jsonb_agg(jsonb_build_object('kind', 'log', 'data', jsonb_build_object('i', i))) FROM generate_series(1, 50) i));
SELECT bgexec.append_events(:j, :l, '[]');
-- a failed batch (bad kind) rolls back whole: no seq is consumed
SELECT bgexec.append_events(:j, :l, '[{"kind": "log"}, {"kind": "bogus"}]');
-- an element that is not an object is named too, and writes nothing
SELECT bgexec.append_events(:j, :l, '[1]');
SELECT bgexec.append_events(:j, :l, '[{"kind": "log"}, [{"kind": "log"}]]');
-- an unknown field is named (a misspelt "data" was stored as {}), and
-- writes nothing
SELECT bgexec.append_events(:j, :l, '[{"kind": "log", "data": {}}, {"kind": "log", "dat": {"lines": ["x"]}}]');
-- data that is not an object is named (it was stored as given: readers
-- look up data.step), and writes nothing; null is {}
SELECT bgexec.append_events(:j, :l, '[{"kind": "log"}, {"kind": "log", "data": [1]}]');
SELECT bgexec.append_event(:j, :l, 'progress', '5');
-- a step's output the worker could not read back at the job's next run
-- (claim's completed_steps): a number past a double's range (22003), or
-- nested deeper than 512 levels (54000), as a resume input
SELECT bgexec.append_events(:j, :l, '[{"kind": "log"}, {"kind": "step_completed", "data": {"step": "a", "output": {"n": [1e400]}}}]');
SELECT bgexec.append_event(:j, :l, 'step_completed', ('{"step": "a", "output": ' || repeat('[', 513) || repeat(']', 513) || '}')::jsonb);
-- so does any other event's data, and a finish's body (in finish_many too):
-- the CLI and the gateway read numbers as doubles, and showed such data as
-- null; the job is not finished
SELECT bgexec.append_events(:j, :l, '[{"kind": "log", "data": {"lines": ["x"]}}, {"kind": "progress", "data": {"pct": [-1e400]}}]');
SELECT bgexec.append_event(:j, :l, 'step_failed', '{"step": "a", "error": {"n": 1e400}}');
SELECT bgexec.append_event(:j, :l, 'log', '{"lines": ["x"], "n": 1e400}');
SELECT bgexec.finish(:j, :l, 'completed', '{"n": 1e400}');
SELECT bgexec.finish(:j, :l, 'failed', '[{"n": 1e400}]');
SELECT * FROM bgexec.finish_many(jsonb_build_array(jsonb_build_object('job_id', :j, 'lease', :l, 'outcome', 'completed', 'body', '{"a": 1}'::jsonb),
                                                   jsonb_build_object('job_id', :j, 'lease', :l, 'outcome', 'completed', 'body', '{"n": 1e400}'::jsonb)));
SELECT status, last_seq FROM bgexec.job WHERE id = :j;
SELECT bgexec.append_event(:j, :l, 'progress', '{"pct": 100}');
SELECT bgexec.finish(:j, :l, 'completed', '{}');
SELECT gapless(:j), count(*), min(seq), max(seq) FROM bgexec.job_event WHERE job_id = :j;
SELECT count(*) FROM bgexec.events(:j, 40);
SELECT count(*) FROM bgexec.events(:j, 53);
-- in batches: max_events at most, in seq order, from the cursor
SELECT min(seq), max(seq), count(*) FROM bgexec.events(:j, 10, max_events => 5);
SELECT count(*) FROM bgexec.events(:j, 50, max_events => 5);
SELECT count(*) FROM bgexec.events(:j, 0, max_events => 0);
SELECT * FROM bgexec.events(:j, 0, max_events => -1);
-- a rolled-back append consumes no seq either
SELECT bgexec.submit('noop', queue => 'ev') AS k \gset
SELECT lease AS l FROM bgexec.claim('w', '{ev}', 1) \gset
BEGIN;
SELECT bgexec.append_event(:k, :l, 'log', '{}');
ROLLBACK;
SELECT bgexec.append_event(:k, :l, 'log', '{}');
SELECT gapless(:k), event_kinds(:k);
-- data null is {} in append_events as in append_event (it was stored as null)
SELECT bgexec.append_events(:k, :l, '[{"kind": "log", "data": null}]') AS seq \gset
SELECT data FROM bgexec.job_event WHERE job_id = :k AND seq = :seq;
-- and a JSON null given to append_event (a mutation test: it was refused)
SELECT bgexec.append_event(:k, :l, 'log', 'null') AS seq \gset
SELECT data FROM bgexec.job_event WHERE job_id = :k AND seq = :seq;
-- notifications (proved in the isolation specs) can be turned off per session
SET bgexec.notify_events = off;
SELECT bgexec.append_event(:k, :l, 'log', '{}');
RESET bgexec.notify_events;
-- negative: events of a job that does not exist
SELECT * FROM bgexec.events(-1);
-- negative: a null job id names no job (22023)
SELECT * FROM bgexec.events(NULL);
-- negative: events must be an array
SELECT bgexec.append_events(:k, :l, '{}');
-- after_seq: a batch retried after a lost reply is written once.  The worker
-- passes the last seq it knows (claim's started_seq, then each append's).
SELECT bgexec.submit('noop', queue => 'ev-retry') AS r \gset
SELECT lease AS l, started_seq AS s0 FROM bgexec.claim('w', '{ev-retry}', 1) \gset
SELECT :s0 AS started_seq;
SELECT bgexec.append_events(:r, :l, '[{"kind": "log", "data": {"lines": ["a"]}}, {"kind": "progress"}]', :s0) AS first;
-- the same batch again (its first reply was lost): nothing new, same answer
SELECT bgexec.append_events(:r, :l, '[{"kind": "log", "data": {"lines": ["a"]}}, {"kind": "progress"}]', :s0) AS retried;
-- a stop request lands between the attempts: still recognised
SELECT bgexec.stop(:r);
SELECT bgexec.append_events(:r, :l, '[{"kind": "log", "data": {"lines": ["a"]}}, {"kind": "progress"}]', :s0) AS retried_after_stop;
-- the same content as a new batch (after_seq current): written
SELECT bgexec.append_events(:r, :l, '[{"kind": "log", "data": {"lines": ["a"]}}, {"kind": "progress"}]', 4) AS same_content_new;
-- other content after a stale after_seq: written (not mistaken for a replay)
SELECT bgexec.append_event(:r, :l, 'log', '{"lines": ["b"]}', 4) AS other_content;
SELECT bgexec.append_event(:r, :l, 'log', '{"lines": ["b"]}', 6) AS single_retried;
-- a lease that is not current writes nothing, replay or not
SELECT bgexec.append_events(:r, :l + 1000, '[{"kind": "log", "data": {"lines": ["b"]}}]', 6) IS NULL AS refused;
SELECT gapless(:r), event_kinds(:r);
SELECT seq, kind, data FROM bgexec.job_event WHERE job_id = :r AND seq > 1 ORDER BY seq;
-- negative: after_seq below zero
SELECT bgexec.append_events(:r, :l, '[{"kind": "log"}]', -1);
-- negative: an after_seq past the job's last seq (no writer has seen it):
-- refused, not written, and so not written twice by its retry; with a lease
-- that is not current, NULL as above
SELECT last_seq AS before_future FROM bgexec.job WHERE id = :r \gset
SELECT bgexec.append_events(:r, :l, '[{"kind": "log"}]', :before_future + 5);
SELECT bgexec.append_event(:r, :l, 'log', '{}', :before_future + 1);
SELECT bgexec.append_events(:r, :l + 1000, '[{"kind": "log"}]', :before_future + 5) IS NULL AS refused;
SELECT last_seq = :before_future AS nothing_written FROM bgexec.job WHERE id = :r;
-- the depth bound (512) is a step output's alone: any other event's data and
-- a finish's body may nest deeper (only their numbers are checked)
SELECT count(bgexec.submit('noop', queue => 'ev-deep')) FROM generate_series(1, 3);
SELECT array_agg(job_id ORDER BY job_id) AS dks, array_agg(lease ORDER BY job_id) AS dls FROM bgexec.claim('w', '{ev-deep}', 3) \gset
SELECT bgexec.append_events((:'dks'::bigint[])[1], (:'dls'::bigint[])[1],
         ('[{"kind": "log"}, {"kind": "step_completed", "data": {"step": "a", "output": ' || repeat('[', 513) || repeat(']', 513) || '}}]')::jsonb);
SELECT bgexec.append_events((:'dks'::bigint[])[1], (:'dls'::bigint[])[1],
         ('[{"kind": "log", "data": {"deep": ' || repeat('[', 600) || repeat(']', 600) || '}}]')::jsonb);
SELECT bgexec.append_events((:'dks'::bigint[])[1], (:'dls'::bigint[])[1],
         ('[{"kind": "log", "data": {"deep": ' || repeat('[', 600) || '1e400' || repeat(']', 600) || '}}]')::jsonb);
-- (a deep event or body does not hide a later one's number)
SELECT bgexec.append_events((:'dks'::bigint[])[1], (:'dls'::bigint[])[1],
         ('[{"kind": "log", "data": {"deep": ' || repeat('[', 600) || repeat(']', 600) || '}}, {"kind": "log", "data": {"n": 1e400}}]')::jsonb);
SELECT * FROM bgexec.finish_many(jsonb_build_array(
         jsonb_build_object('job_id', (:'dks'::bigint[])[2], 'lease', (:'dls'::bigint[])[2], 'outcome', 'completed',
                            'body', ('{"deep": ' || repeat('[', 600) || repeat(']', 600) || '}')::jsonb),
         jsonb_build_object('job_id', (:'dks'::bigint[])[3], 'lease', (:'dls'::bigint[])[3], 'outcome', 'completed', 'body', '{"n": 1e400}'::jsonb)));
SELECT bgexec.finish((:'dks'::bigint[])[1], (:'dls'::bigint[])[1], 'failed', ('{"deep": ' || repeat('[', 600) || repeat(']', 600) || '}')::jsonb);
SELECT status FROM bgexec.finish_many(jsonb_build_array(jsonb_build_object('job_id', (:'dks'::bigint[])[2], 'lease', (:'dls'::bigint[])[2],
         'outcome', 'completed', 'body', ('{"deep": ' || repeat('[', 600) || repeat(']', 600) || '}')::jsonb)));
SELECT status, jsonb_typeof(coalesce(error, result)->'deep') AS deep, last_seq FROM bgexec.job WHERE id = ANY (:'dks'::bigint[]) ORDER BY id;

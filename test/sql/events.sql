-- events: gapless seq per job, replay after a cursor, NOTIFY bgexec_events "job:seq".
\set SHOW_CONTEXT never
SELECT bgexec.submit('noop', queue => 'ev') AS j \gset
SELECT lease AS l FROM bgexec.claim('w', '{ev}', 1) \gset
SELECT bgexec.append_events(:j, :l, (SELECT jsonb_agg(jsonb_build_object('kind', 'log', 'data', jsonb_build_object('i', i))) FROM generate_series(1, 50) i));
SELECT bgexec.append_events(:j, :l, '[]');
-- a failed batch (bad kind) rolls back whole: no seq is consumed
SELECT bgexec.append_events(:j, :l, '[{"kind": "log"}, {"kind": "bogus"}]');
SELECT bgexec.append_event(:j, :l, 'progress', '{"pct": 100}');
SELECT bgexec.finish(:j, :l, 'completed', '{}');
SELECT gapless(:j), count(*), min(seq), max(seq) FROM bgexec.job_event WHERE job_id = :j;
SELECT count(*) FROM bgexec.events(:j, 40);
SELECT count(*) FROM bgexec.events(:j, 53);
-- a rolled-back append consumes no seq either
SELECT bgexec.submit('noop', queue => 'ev') AS k \gset
SELECT lease AS l FROM bgexec.claim('w', '{ev}', 1) \gset
BEGIN;
SELECT bgexec.append_event(:k, :l, 'log', '{}');
ROLLBACK;
SELECT bgexec.append_event(:k, :l, 'log', '{}');
SELECT gapless(:k), event_kinds(:k);
-- notifications (proved in the isolation specs) can be turned off per session
SET bgexec.notify_events = off;
SELECT bgexec.append_event(:k, :l, 'log', '{}');
RESET bgexec.notify_events;
-- negative: events of a job that does not exist
SELECT * FROM bgexec.events(-1);
-- negative: events must be an array
SELECT bgexec.append_events(:k, :l, '{}');

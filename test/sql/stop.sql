-- stop: queued/suspended → cancelled now; running → stop requested; terminal → no-op.
\set SHOW_CONTEXT never
SELECT bgexec.submit('noop', queue => 'st') AS q \gset
SELECT bgexec.stop(:q);
SELECT status, error->>'reason' AS reason, finished_at IS NOT NULL AS finished FROM bgexec.job WHERE id = :q;
-- a cancelled job is never claimed
SELECT count(*) FROM bgexec.claim('w', '{st}', 5);
-- terminal: no-op, returns the status, no second terminal event
SELECT bgexec.stop(:q);
SELECT event_kinds(:q), terminal_events(:q);
-- running: stop requested (event; NOTIFY is proved in the isolation specs), the worker sees 'stop' on heartbeat
SELECT bgexec.submit('noop', queue => 'st') AS r \gset
SELECT lease AS l FROM bgexec.claim('w', '{st}', 1) \gset
SELECT bgexec.stop(:r);
SELECT bgexec.stop(:r);  -- idempotent: no second stop_requested event
SELECT status, stop_requested_at IS NOT NULL AS requested FROM bgexec.job WHERE id = :r;
SELECT action FROM bgexec.heartbeat('w', ARRAY[:l]::bigint[]);
-- the worker ends it cancelled; a failed report after a stop is not retried
SELECT bgexec.finish(:r, :l, 'cancelled', '{"message": "stopped"}');
SELECT event_kinds(:r), gapless(:r), terminal_events(:r);
SELECT bgexec.submit('noop', queue => 'st', max_attempts => 3) AS f \gset
SELECT lease AS l FROM bgexec.claim('w', '{st}', 1) \gset
SELECT bgexec.stop(:f);
SELECT bgexec.finish(:f, :l, 'failed', '{"message": "killed"}');
-- stop requested and the worker vanished: reconcile ends it cancelled
SELECT bgexec.submit('noop', queue => 'st', max_attempts => 3) AS v \gset
SELECT lease AS l FROM bgexec.claim('w', '{st}', 1) \gset
SELECT bgexec.stop(:v);
SELECT expire_lease(:v);
SELECT bgexec.reconcile();
SELECT status, error->>'reason' AS reason FROM bgexec.job WHERE id = :v;
SELECT event_kinds(:v), terminal_events(:v);
-- negative: stop of a job that does not exist
SELECT bgexec.stop(-1);

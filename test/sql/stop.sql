-- stop: queued/suspended → cancelled now; running → stop requested; terminal → no-op.
\set SHOW_CONTEXT never
SELECT extend_leftover_leases() AS leftovers_extended;
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
-- stop requested, then the worker suspends the job (an approval step): it
-- ends cancelled, one terminal event, instead of waiting for a resume that
-- would only hear stop; by finish and by finish_many
SELECT bgexec.submit('noop', queue => 'st') AS s \gset
SELECT lease AS l FROM bgexec.claim('w', '{st}', 1) \gset
SELECT bgexec.stop(:s);
SELECT bgexec.finish(:s, :l, 'suspended', '{"step": "gate"}');
SELECT status, error - 'message' AS error, lease IS NULL AS released, finished_at IS NOT NULL AS finished
  FROM bgexec.job WHERE id = :s;
SELECT event_kinds(:s), gapless(:s), terminal_events(:s);
SELECT bgexec.resume(:s);
SELECT bgexec.submit('noop', queue => 'st') AS s \gset
SELECT lease AS l FROM bgexec.claim('w', '{st}', 1) \gset
SELECT bgexec.stop(:s);
SELECT status FROM bgexec.finish_many(jsonb_build_array(
	jsonb_build_object('job_id', :s, 'lease', :l, 'outcome', 'suspended', 'body', jsonb_build_object('step', 'gate'))));
SELECT status, event_kinds(:s), terminal_events(:s) FROM bgexec.job WHERE id = :s;
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
-- negative: a null job id names no job (22023)
SELECT bgexec.stop(NULL);

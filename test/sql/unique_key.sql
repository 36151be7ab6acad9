-- unique_key: unique while active.  While a job of the owner with the key is
-- queued, running or suspended, submit returns it and creates nothing; once
-- it has ended, the key submits a new job.
\set SHOW_CONTEXT never
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'u1') AS a \gset
SELECT bgexec.submit('noop', '{"other": true}', queue => 'uq', unique_key => 'u1') = :a AS queued_same;
SELECT count(*) FROM bgexec.job WHERE unique_key = 'u1';
-- a duplicate returns the job without creating one: not "inserted here"
SELECT bgexec._inserted_here(id) AS created FROM (SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'u1') AS id OFFSET 0) s;
-- running: still the same job
SELECT lease AS l FROM bgexec.claim('w', '{uq}', 1) \gset
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'u1') = :a AS running_same;
-- ended: the key is free, a new job
SELECT bgexec.finish(:a, :l, 'failed', '{"message": "x"}');
SELECT id AS b, bgexec._inserted_here(id) AS created
  FROM (SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'u1') AS id OFFSET 0) s \gset
SELECT :b <> :a AS new_after_end, :'created' AS created_new;
SELECT status, count(*) FROM bgexec.job WHERE unique_key = 'u1' GROUP BY status ORDER BY status;
-- retry of the ended job while the new one holds the key: refused (23505,
-- naming the key and the holder), nothing changed
SELECT set_config('uq.a', :'a', false) IS NOT NULL AS noted;
DO $$ BEGIN
	PERFORM bgexec.retry(current_setting('uq.a')::bigint);
EXCEPTION WHEN unique_violation THEN
	RAISE NOTICE '23505: %', regexp_replace(SQLERRM, 'job \d+', 'job N', 'g');
END $$;
SELECT status FROM bgexec.job WHERE id = :a;
-- stop the holder: the key is free again, and the retry goes through
SELECT bgexec.stop(:b);
SELECT bgexec.retry(:a) AS retried;
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'u1') = :a AS retried_holds_key;
-- suspended is active: a suspended job holds its key
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'sus') AS s \gset
UPDATE bgexec.job SET status = 'suspended' WHERE id = :s;
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'sus') = :s AS suspended_same;
-- completed and cancelled free the key
SELECT bgexec.stop(:s);
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'sus') <> :s AS new_after_cancel;
-- scoped per owner: another role's key is its own
SET ROLE regress_alice;
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'u1') <> :a AS alice_own_job;
RESET ROLE;
SELECT owner, count(*) FROM bgexec.job WHERE unique_key = 'u1' AND status IN ('queued', 'running', 'suspended')
 GROUP BY owner ORDER BY owner;
-- a retry checks the retried job's owner's keys only: another role's active
-- job with the key neither refuses it nor is named to it
SET ROLE regress_alice;
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'x1') AS ax \gset
RESET ROLE;
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'x1') AS px \gset
SELECT bgexec.stop(:px);
SELECT bgexec.retry(:px) AS retried_beside_alices_key;
-- a SERIALIZABLE submit (no snapshot pre-check: it reads the key after its
-- insert) returns the key's active job, never an ended one of the key
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'ser') AS s1 \gset
SELECT bgexec.stop(:s1);
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'ser') AS s2 \gset
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'ser') = :s2 AS serializable_active_same;
COMMIT;
-- a suspended holder refuses the retry with the same message as a queued one
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'sr') AS e1 \gset
SELECT bgexec.stop(:e1);
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'sr') AS e2 \gset
UPDATE bgexec.job SET status = 'suspended' WHERE id = :e2;
SELECT sqlstate, regexp_replace(message, 'job \d+', 'job N', 'g') AS message
  FROM try(format('SELECT bgexec.retry(%s)', :e1));
-- negative: an empty or a 513-character key; both keys at once (22023)
SELECT bgexec.submit('noop', unique_key => '');
SELECT bgexec.submit('noop', unique_key => repeat('u', 513));
SELECT bgexec.submit('noop', unique_key => 'x', idempotency_key => 'y');
SELECT count(*) FROM bgexec.job WHERE unique_key IN ('x', '') OR idempotency_key = 'y';
SELECT bgexec.submit('noop', queue => 'uq', unique_key => repeat('u', 512)) > 0 AS key_512;
-- transactional: rolled back, the key is free
BEGIN;
SELECT bgexec.submit('noop', queue => 'uq', unique_key => 'rolled') IS NOT NULL AS submitted;
ROLLBACK;
SELECT count(*) FROM bgexec.job WHERE unique_key = 'rolled';
-- submit_many: duplicates inside one call dedupe, an active key returns its
-- job, mixed with keyless elements; ids in array order
SELECT count(DISTINCT id), count(*) FROM bgexec.submit_many('[{"kind": "noop", "queue": "uq", "unique_key": "m1"}, {"kind": "noop", "queue": "uq", "unique_key": "m1"}, {"kind": "noop", "queue": "uq"}]') AS id;
SELECT (SELECT array_agg(id) FROM bgexec.submit_many('[{"kind": "noop", "queue": "uq", "unique_key": "u1"}]') AS id) = ARRAY[:a]::bigint[] AS many_same;
SELECT bgexec.submit_many('[{"kind": "noop", "unique_key": 7}]');
SELECT bgexec.submit_many('[{"kind": "noop", "unique_key": ""}]');
SELECT bgexec.submit_many('[{"kind": "noop", "unique_key": "a", "idempotency_key": "b"}]');
-- a capped queue: a duplicate returns the job even when the queue is full
SELECT (bgexec.configure_queue('uqcap', max_queued => 1)).name;
SELECT bgexec.submit('noop', queue => 'uqcap', unique_key => 'c1') AS c \gset
SELECT bgexec.submit('noop', queue => 'uqcap', unique_key => 'c1') = :c AS full_same;
SELECT bgexec.submit('noop', queue => 'uqcap', unique_key => 'c2');
-- the key is stored; a job without one has none (and no index entry)
SELECT unique_key FROM bgexec.job WHERE id = :a;
SELECT pg_get_indexdef('bgexec.job_unique_idx'::regclass);

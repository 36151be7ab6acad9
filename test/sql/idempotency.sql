-- idempotency: same owner + same key → the existing job, nothing inserted.
\set SHOW_CONTEXT never
SELECT bgexec.submit('noop', queue => 'idem', idempotency_key => 'k1') AS a \gset
SELECT bgexec.submit('noop', '{"other": true}', queue => 'idem', idempotency_key => 'k1') AS b \gset
SELECT :a = :b AS same_job;
SELECT count(*), max(payload::text) FROM bgexec.job WHERE idempotency_key = 'k1';
-- a different key is a different job
SELECT bgexec.submit('noop', queue => 'idem', idempotency_key => 'k2') <> :a AS new_job;
-- the key survives the job finishing: still deduplicated
SELECT lease AS l FROM bgexec.claim('w', '{idem}', 1) \gset
SELECT bgexec.finish(:a, :l, 'completed', '{}');
SELECT bgexec.submit('noop', queue => 'idem', idempotency_key => 'k1') = :a AS still_same;
-- the key is scoped per owner: another role gets its own job
SET ROLE regress_alice;
SELECT bgexec.submit('noop', queue => 'idem', idempotency_key => 'k1') <> :a AS alice_own_job;
SELECT bgexec.submit('noop', queue => 'idem', idempotency_key => 'k1') AS alice_again \gset
RESET ROLE;
SELECT count(*) FROM bgexec.job WHERE idempotency_key = 'k1';
SELECT owner, count(*) FROM bgexec.job WHERE idempotency_key = 'k1' GROUP BY owner ORDER BY owner;
-- negative: an empty key is refused
SELECT bgexec.submit('noop', idempotency_key => '');
-- submit is transactional: rolled back, nothing remains and the key is free
BEGIN;
SELECT bgexec.submit('noop', queue => 'idem', idempotency_key => 'rolled') IS NOT NULL AS submitted;
ROLLBACK;
SELECT count(*) FROM bgexec.job WHERE idempotency_key = 'rolled';
-- submit_many with keys takes the per-row path: duplicates inside one call dedupe too
SELECT count(DISTINCT id), count(*) FROM bgexec.submit_many('[{"kind": "noop", "idempotency_key": "m1"}, {"kind": "noop", "idempotency_key": "m1"}, {"kind": "noop", "idempotency_key": "m2"}]') AS id;
-- _inserted_here tells a created job from the existing one a key returned
-- (the gateway's 201 / 200); another owner's job is never "here"
SET ROLE regress_alice;
SELECT bgexec._inserted_here(id) AS created FROM (SELECT bgexec.submit('noop', queue => 'idem', idempotency_key => 'h1') AS id OFFSET 0) s;
SELECT bgexec._inserted_here(id) AS created FROM (SELECT bgexec.submit('noop', queue => 'idem', idempotency_key => 'h1') AS id OFFSET 0) s;
BEGIN;
SELECT bgexec._inserted_here(bgexec.submit('noop', queue => 'idem')) AS created_in_txn;
SELECT bgexec._inserted_here(:a) AS others_job;
ROLLBACK;
-- a job this transaction only changed (stopped) before its key returned it
-- is not "here" (the row's xmin is this transaction's all the same)
SELECT bgexec.submit('noop', queue => 'idem', idempotency_key => 'h2') AS h2 \gset
BEGIN;
SELECT bgexec.stop(:h2);
SELECT bgexec._inserted_here(bgexec.submit('noop', queue => 'idem', idempotency_key => 'h2')) AS changed_here_only;
ROLLBACK;
-- a job inserted under a savepoint is "here", before and after its release,
-- and after a change in the same transaction
BEGIN;
SAVEPOINT sp;
SELECT bgexec.submit('noop', queue => 'idem', idempotency_key => 'h3') AS h3 \gset
SELECT bgexec._inserted_here(:h3) AS created_under_savepoint;
RELEASE SAVEPOINT sp;
SELECT bgexec._inserted_here(:h3) AS after_release;
SELECT bgexec.stop(:h3);
SELECT bgexec._inserted_here(:h3) AS after_a_stop;
ROLLBACK;
RESET ROLE;

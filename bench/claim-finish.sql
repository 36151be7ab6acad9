-- Server-side A/B harness for the drain's SQL (bench/README.md, "What
-- changed, measured"): one transaction claims 64 jobs and finishes them,
-- with no daemon in the way.  Fill a queue 'pq' first, then
--   pgbench -n -c 2 -j 2 -T 5 -f bench/claim-finish.sql
-- jobs/s = tps x 64 (while the queue lasts: fill more than the run drains).
SELECT count(*) FROM bgexec.finish_many((
  SELECT jsonb_agg(jsonb_build_object('job_id', job_id, 'lease', lease,
                                      'outcome', 'completed', 'body', '{}'::jsonb))
    FROM bgexec.claim('ab-' || :client_id, '{pq}', 64)));

#!/usr/bin/env bash
# bench/reconcile-expired.sh: the cost of one reconcile() that takes back a
# whole fleet's leases at once (every worker killed, or partitioned away).
#
# Each round: TRUNCATE bgexec.job, submit N noop jobs, claim them all as four
# workers, set every lease in the past, VACUUM ANALYZE, then time
# SELECT bgexec.reconcile() in one session: its wall time and its backend's
# CPU (utime + stime from /proc, 10 ms ticks), which stay comparable on a
# shared machine where wall time does not.  The database must be on this
# host (for /proc), and the role a superuser (the UPDATE of the leases).
#
# Usage: bench/reconcile-expired.sh   (database from the libpq PG* variables)
# RECONCILE_JOBS (default 5000), RECONCILE_ATTEMPTS (max_attempts of the jobs,
# default 1: every job fails worker_lost; 3: every job is re-queued),
# RECONCILE_ROUNDS (default 3).  Deletes every job of the database.
set -euo pipefail
n=${RECONCILE_JOBS:-5000}
attempts=${RECONCILE_ATTEMPTS:-1}
rounds=${RECONCILE_ROUNDS:-3}
for r in $(seq 1 "$rounds"); do
  psql -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
TRUNCATE bgexec.job;
SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object(
       'kind', 'noop', 'max_attempts', $attempts)) FROM generate_series(1, $n)));
SELECT bgexec.register_worker('bench-w' || i, '{default}', $n, '{}') FROM generate_series(1, 4) i;
SELECT count(*) FROM generate_series(1, 4) i,
       LATERAL bgexec.claim('bench-w' || i, '{default}', ($n + 3) / 4, '30 s');
UPDATE bgexec.job SET lease_expires_at = now() - interval '1 second' WHERE status = 'running';
VACUUM ANALYZE bgexec.job;
VACUUM ANALYZE bgexec.job_event;
SQL
  out=$(psql -qX -At -v ON_ERROR_STOP=1 <<'SQL'
SELECT pg_backend_pid() AS pid \gset
\setenv BGEXEC_BENCH_PID :pid
\! awk '{print "cpu0", $14 + $15}' /proc/$BGEXEC_BENCH_PID/stat
\timing on
SELECT bgexec.reconcile();
\timing off
\! awk '{print "cpu1", $14 + $15}' /proc/$BGEXEC_BENCH_PID/stat
SQL
)
  echo "$out" | awk -v n="$n" -v a="$attempts" -v r="$r" '
    /^cpu0/ {c0 = $2} /^cpu1/ {c1 = $2} /^Time:/ {t = $2} /^[0-9]+$/ {k = $1}
    END {printf "round %d: %d expired leases (max_attempts %d), %d taken back, wall %.0f ms, backend CPU %d ms\n",
                r, n, a, k, t, (c1 - c0) * 10}'
done

#!/usr/bin/env bash
# Soak: steady load at a fixed rate for SOAK_SECONDS (default 1200 = 20 min)
# against a throwaway cluster with production durability and retention on;
# samples worker RSS, the hot tables' size and dead tuples (and job's heap and rows), the time of
# one reconcile() every SOAK_SAMPLE seconds into bench/out/soak.csv, and
# prints a summary.
# SOAK_RATE jobs/s (default 2000, submitted as submit_many batches of 500 by
# pgbench -R), or "max": the full drain rate, with the queue kept at least
# SOAK_BACKLOG (default 4000) jobs deep by batches of 2000; SOAK_WORKERS x
# SOAK_CONCURRENCY workers (default 2 x 16); retention every second in
# batches of max(5000, 2 x rate) (100 000 at "max").
# SOAK_SETTING: one more postgresql.conf line for the cluster (an A/B of a
# setting, e.g. "bgexec.vacuum_threshold = -1").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_TOTAL=${SOAK_SECONDS:-1200}
SAMPLE=${SOAK_SAMPLE:-30}
RATE=${SOAK_RATE:-2000}
BATCH=500
BACKLOG=${SOAK_BACKLOG:-4000}
if [[ $RATE == max ]]; then
  BATCH=2000
elif ! [[ $RATE =~ ^[1-9][0-9]*$ ]]; then
  echo "soak: SOAK_RATE must be a number of jobs/s or max" >&2
  exit 2
fi
W=${SOAK_WORKERS:-2}
C=${SOAK_CONCURRENCY:-16}
# Retention runs once a second: its batch must exceed the rate, or the
# terminal rows it is meant to delete pile up.
if [[ $RATE == max ]]; then
  RETENTION_BATCH=100000
else
  RETENTION_BATCH=$(( RATE * 2 > 5000 ? RATE * 2 : 5000 ))
fi
BIN=${BGEXEC_BIN:-$ROOT/daemon/build/bgexec}
PGBENCH=/usr/lib/postgresql/15/bin/pgbench
OUT=$ROOT/bench/out
mkdir -p "$OUT"

PORT=${BGEXEC_SOAK_PORT:-55435}
source scripts/lib/cluster.sh
scratch_dir soak

cluster_start "$WORK/cluster" "$PORT" "fsync = on" "synchronous_commit = on" \
  "shared_buffers = 256MB" "max_wal_size = 4GB" \
  "bgexec.retention = '30s'" "bgexec.retention_batch = $RETENTION_BATCH" "bgexec.watchdog_interval = '1s'" \
  ${SOAK_SETTING:+"$SOAK_SETTING"}
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION bgexec" postgres
cat >"$WORK/submit.sql" <<SQL
SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg('{"kind": "noop"}'::jsonb) FROM generate_series(1, $BATCH)));
SQL
# At "max" a batch goes in whenever fewer than BACKLOG jobs are queued (a
# count that stops at BACKLOG entries of the runnable index), so the workers
# never run dry and drain as fast as they can.
cat >"$WORK/submit-max.sql" <<SQL
SELECT (count(*) < $BACKLOG)::int AS low
  FROM (SELECT 1 FROM bgexec.job WHERE status = 'queued' LIMIT $BACKLOG) q \gset
\if :low
SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg('{"kind": "noop"}'::jsonb) FROM generate_series(1, $BATCH)));
\else
\sleep 20 ms
\endif
SQL
for i in $(seq 1 "$W"); do
  BGEXEC_LOG_LEVEL=warn "$BIN" worker --id "soak-$i" --concurrency "$C" \
    --db "host=$WORK/cluster port=$PORT user=postgres dbname=postgres" 2>"$WORK/w$i.log" &
  pids+=($!)
done
sleep 1
if [[ $RATE == max ]]; then
  "$PGBENCH" -n -c 1 -T "$SECONDS_TOTAL" -f "$WORK/submit-max.sql" postgres >"$WORK/pgbench.log" 2>&1 &
else
  "$PGBENCH" -n -c 1 -R "$(awk "BEGIN {print $RATE / $BATCH}")" -T "$SECONDS_TOTAL" -f "$WORK/submit.sql" \
    postgres >"$WORK/pgbench.log" 2>&1 &
fi
pids+=($!)

csv=$OUT/soak.csv
echo "t_s,worker_rss_kib,job_updates_total,queued,job_bytes,job_dead,job_event_bytes,job_event_dead,reconcile_ms,jobs_done_total,jobs_done_per_s,job_heap_bytes,job_rows" >"$csv"
start=$SECONDS
prev_t=0 prev_done=0
while ((SECONDS - start < SECONDS_TOTAL)); do
  sleep "$SAMPLE"
  rss=0
  for i in $(seq 1 "$W"); do
    r=$(awk '/VmRSS/ {print $2}' "/proc/${pids[$((i - 1))]}/status" 2>/dev/null || echo 0)
    ((r > rss)) && rss=$r
  done
  row=$(psql -X -qAt -F, postgres -c "
    SELECT (SELECT coalesce(sum(n_tup_upd), 0) FROM pg_stat_user_tables WHERE relname = 'job'),
           (SELECT count(*) FROM bgexec.job WHERE status = 'queued'),
           pg_total_relation_size('bgexec.job'),
           (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'bgexec.job'::regclass),
           pg_total_relation_size('bgexec.job_event'),
           (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'bgexec.job_event'::regclass),
           -- jobs finished so far: inserted (statistics, a second or so
           -- behind) less those still queued or running
           (SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = 'bgexec.job'::regclass)
           - (SELECT count(*) FROM bgexec.job WHERE status IN ('queued', 'running'))")
  done_total=${row##*,} row=${row%,*}
  # Where job's size sits: its heap alone, and the rows it holds (the
  # retention window's worth, if retention keeps up).
  heap=$(psql -X -qAt -F, postgres -c "SELECT pg_relation_size('bgexec.job'), (SELECT count(*) FROM bgexec.job)")
  # What a reconcile() costs now (the watchdog runs one every second): the
  # second of two calls in one session, so plpgsql's first-call setup is out.
  rec=$(psql -X -qAt postgres -c '\timing on' -c 'SELECT bgexec.reconcile()' -c 'SELECT bgexec.reconcile()' |
    awk '/^Time:/ {t = $2} END {print t}')
  # Jobs finished per second over the last interval.
  t=$((SECONDS - start))
  rate=$(( t > prev_t ? (done_total - prev_done) / (t - prev_t) : 0 ))
  prev_t=$t prev_done=$done_total
  echo "$t,$rss,$row,$rec,$done_total,$rate,$heap" | tee -a "$csv"
done
echo "== soak done: $csv"
awk -F, 'NR == 2 {r0 = $2; j0 = $5; e0 = $7} NR > 1 {r = $2; if ($5 > jm) jm = $5; if ($7 > em) em = $7; if ($6 > dm) dm = $6; if ($4 > qm) qm = $4; if ($9 > rm) rm = $9}
  NR > 2 {n++; if (n == 1 || $11 < lo) lo = $11; if ($11 > hi) hi = $11}
  END {printf "worker RSS first/last: %d/%d KiB; job table max %.1f MiB (first %.1f); job_event max %.1f MiB (first %.1f); max dead tuples in job %d; max queued %d; slowest reconcile %.1f ms; jobs done %d (%d-%d jobs/s after the first sample)\n",
       r0, r, jm / 1048576, j0 / 1048576, em / 1048576, e0 / 1048576, dm, qm, rm, $10, lo, hi}' "$csv"

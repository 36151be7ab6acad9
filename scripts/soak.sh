#!/usr/bin/env bash
# Soak: steady load at a fixed rate for SOAK_SECONDS (default 1200 = 20 min)
# against a throwaway cluster with production durability and retention on;
# samples worker RSS, the hot tables' size and dead tuples, and the time of
# one reconcile() every SOAK_SAMPLE seconds into bench/out/soak.csv, and
# prints a summary.
# SOAK_RATE jobs/s (default 2000, submitted as submit_many batches of 500 by
# pgbench -R), SOAK_WORKERS x SOAK_CONCURRENCY workers (default 2 x 16);
# retention every second in batches of max(5000, 2 x rate).
# SOAK_SETTING: one more postgresql.conf line for the cluster (an A/B of a
# setting, e.g. "bgexec.vacuum_threshold = -1").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_TOTAL=${SOAK_SECONDS:-1200}
SAMPLE=${SOAK_SAMPLE:-30}
RATE=${SOAK_RATE:-2000}
BATCH=500
W=${SOAK_WORKERS:-2}
C=${SOAK_CONCURRENCY:-16}
# Retention runs once a second: its batch must exceed the rate, or the
# terminal rows it is meant to delete pile up.
RETENTION_BATCH=$(( RATE * 2 > 5000 ? RATE * 2 : 5000 ))
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
for i in $(seq 1 "$W"); do
  BGEXEC_LOG_LEVEL=warn "$BIN" worker --id "soak-$i" --concurrency "$C" \
    --db "host=$WORK/cluster port=$PORT user=postgres dbname=postgres" 2>"$WORK/w$i.log" &
  pids+=($!)
done
sleep 1
"$PGBENCH" -n -c 1 -R "$(awk "BEGIN {print $RATE / $BATCH}")" -T "$SECONDS_TOTAL" -f "$WORK/submit.sql" \
  postgres >"$WORK/pgbench.log" 2>&1 &
pids+=($!)

csv=$OUT/soak.csv
echo "t_s,worker_rss_kib,job_updates_total,queued,job_bytes,job_dead,job_event_bytes,job_event_dead,reconcile_ms" >"$csv"
start=$SECONDS
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
           (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'bgexec.job_event'::regclass)")
  # What a reconcile() costs now (the watchdog runs one every second): the
  # second of two calls in one session, so plpgsql's first-call setup is out.
  rec=$(psql -X -qAt postgres -c '\timing on' -c 'SELECT bgexec.reconcile()' -c 'SELECT bgexec.reconcile()' |
    awk '/^Time:/ {t = $2} END {print t}')
  echo "$((SECONDS - start)),$rss,$row,$rec" | tee -a "$csv"
done
echo "== soak done: $csv"
awk -F, 'NR == 2 {r0 = $2; j0 = $5; e0 = $7} NR > 1 {r = $2; if ($5 > jm) jm = $5; if ($7 > em) em = $7; if ($6 > dm) dm = $6; if ($4 > qm) qm = $4; if ($9 > rm) rm = $9}
  END {printf "worker RSS first/last: %d/%d KiB; job table max %.1f MiB (first %.1f); job_event max %.1f MiB (first %.1f); max dead tuples in job %d; max queued %d; slowest reconcile %.1f ms\n",
       r0, r, jm / 1048576, j0 / 1048576, em / 1048576, e0 / 1048576, dm, qm, rm}' "$csv"

#!/usr/bin/env bash
# `make bench`: the burn-down benchmark on a throwaway PostgreSQL 15 cluster
# with production-like durability (fsync on, synchronous_commit on,
# shared_buffers 256MB).  Installs missing packages, builds the extension and
# the daemon, runs `bgexec bench` (and its --scaling mode), writes
# bench/out/results.json, and stops exactly the postmaster it started.
# BENCH_ARGS adds flags to bgexec bench (e.g. "--jobs 50000");
# BENCH_SCALING=0 skips the scaling mode; pg_stat_statements is preloaded and
# its top statements land in bench/out/pg_stat_statements.txt (BENCH_PROFILE=0
# leaves it out).  Then bench/floor.sh measures the drain's data model as bare
# SQL at batches of 64 and 16 (bench/out/floor.txt; BENCH_FLOOR=0 skips it),
# and bench/burn-down.sh drains a backlog of 300 000 jobs with and without the
# watchdog's vacuum (bench/out/burn-down.txt; BENCH_BURNDOWN=0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

scripts/deps.sh
echo "== building the extension and the daemon"
make -s install >/dev/null
BUILD=${BENCH_BUILD_DIR:-$ROOT/daemon/build}
if [[ $BUILD != "$ROOT/daemon/build" ]]; then
  cmake -S daemon -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" -j "$(nproc)" >/dev/null
fi
BIN=$BUILD/bgexec

PORT=${BGEXEC_BENCH_PORT:-55434}
OUT=$ROOT/bench/out
mkdir -p "$OUT"
source scripts/lib/cluster.sh
scratch_dir bench

preload=bgexec,pg_stat_statements
[[ ${BENCH_PROFILE:-1} == 0 ]] && preload=bgexec
echo "== starting a throwaway PostgreSQL 15 cluster on port $PORT (fsync on, synchronous_commit on)"
cluster_start "$WORK/cluster" "$PORT" \
  "fsync = on" "synchronous_commit = on" "full_page_writes = on" \
  "shared_buffers = 256MB" "max_wal_size = 4GB" "checkpoint_timeout = 15min" \
  "shared_preload_libraries = '$preload'" "track_io_timing = on"
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION bgexec" postgres
[[ $preload == *pg_stat_statements* ]] && psql -X -q -c "CREATE EXTENSION pg_stat_statements" postgres

scaling=(--scaling)
[[ ${BENCH_SCALING:-1} == 0 ]] && scaling=()
echo "== bgexec bench"
rc=0
"$BIN" bench --db "host=$WORK/cluster port=$PORT user=postgres dbname=postgres" \
  --json "$OUT/results.json" --keep "${scaling[@]}" ${BENCH_ARGS:-} || rc=$?
if [[ $preload == *pg_stat_statements* ]]; then
  psql -X -P pager=off -c "SELECT calls, round(total_exec_time::numeric, 1) AS total_ms,
      round(mean_exec_time::numeric, 3) AS mean_ms, rows, wal_bytes, left(query, 90) AS query
    FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 25" postgres >"$OUT/pg_stat_statements.txt"
fi
if [[ ${BENCH_FLOOR:-1} != 0 ]]; then
  echo "== bench/floor.sh: the data model as bare SQL"
  for b in 64 16; do
    echo "-- batches of $b"
    FLOOR_BATCH=$b bench/floor.sh
  done | tee "$OUT/floor.txt" || rc=$?
fi
if [[ ${BENCH_BURNDOWN:-1} != 0 ]]; then
  echo "== bench/burn-down.sh: a deep backlog with and without the watchdog's vacuum"
  BGEXEC_BIN=$BIN bench/burn-down.sh | tee "$OUT/burn-down.txt" || rc=$?
fi
echo "== results in bench/out/results.json"
exit $rc

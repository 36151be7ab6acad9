#!/usr/bin/env bash
# bench/burn-down.sh: the drain of a deep backlog with and without the
# watchdog's vacuum of bgexec.job (bench/README.md, "Sixth round").
#
# A claim reads job_runnable_idx from the head of its queue, and the entries
# of the jobs claimed since the table's last vacuum stay on its leaf pages
# until a vacuum deletes them, so without one each claim walks further.
# Each round runs `bgexec bench` draining BURN_JOBS noop jobs (2 workers x 16)
# twice: with bgexec.vacuum_threshold = -1 (autovacuum only) and with the
# server's own setting; rounds alternate which goes first (the machine is
# shared and noisy) and each figure is the median of its runs.
#
# Usage: bench/burn-down.sh   (database from the libpq PG* variables, bgexec
# installed, the watchdog running in that database, a superuser: the setting
# is changed with ALTER SYSTEM and reset after)
# BURN_JOBS (default 300000), BURN_ROUNDS (default 2), BGEXEC_BIN (default
# daemon/build/bgexec).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
jobs=${BURN_JOBS:-300000}
rounds=${BURN_ROUNDS:-2}
bin=${BGEXEC_BIN:-$PWD/daemon/build/bgexec}
sql() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

[[ $(sql -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'bgexec watchdog'
              AND datname = current_database()") == 1 ]] \
  || { echo "burn-down: no bgexec watchdog in this database (shared_preload_libraries, bgexec.database)" >&2; exit 1; }
was=$(sql -c "SELECT setting FROM pg_settings WHERE name = 'bgexec.vacuum_threshold'")
[[ $was -ge 0 ]] || { echo "burn-down: bgexec.vacuum_threshold is -1 here; nothing to compare" >&2; exit 1; }
tmp=$(mktemp -d /tmp/bgexec-burn.XXXXXX)
cleanup() {
  sql -c "ALTER SYSTEM RESET bgexec.vacuum_threshold" -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

run() {  # run THRESHOLD: one drain, jobs/s
  sql -c "ALTER SYSTEM SET bgexec.vacuum_threshold = $1" -c "SELECT pg_reload_conf()" >/dev/null
  # Every run starts from a vacuumed table (the previous run's jobs deleted).
  sql -c "VACUUM bgexec.job" >/dev/null
  sleep 1
  "$bin" bench --jobs "$jobs" --rounds 1 --workers 2 --concurrency 16 --pickup-jobs 1 --skip-reference --skip-rss 2>&1 |
    awk '/^bench: drain: [0-9.]+ jobs\/s/ {print $3}'
}
echo "burn-down: $rounds rounds of $jobs jobs, 2 x 16, vacuum_threshold -1 vs $was" >&2
for r in $(seq 1 "$rounds"); do
  order=(-1 "$was")
  ((r % 2 == 0)) && order=("$was" -1)
  for t in "${order[@]}"; do
    v=$(run "$t")
    [[ -n $v ]] || { echo "burn-down: the bench failed" >&2; exit 1; }
    echo "$t $v" >>"$tmp/results"
    echo "burn-down: round $r, vacuum_threshold $t: $v jobs/s" >&2
  done
done
awk -v was="$was" "$MEDIAN_AWK"'
  END {
    printf "%-28s %10s\n", "vacuum_threshold", "jobs/s"
    printf "%-28s %10.0f\n", "-1 (autovacuum only)", median("-1")
    printf "%-28s %10.0f %6.2fx\n", was " (watchdog vacuums)", median(was), median(was) / median("-1")
  }' "$tmp/results"

#!/usr/bin/env bash
# bench/gateway-ab.sh: interleaved A/B of two `bgexec serve` binaries under
# HTTP load (bench/README.md, "The gateway").
#
# Starts a throwaway PostgreSQL 15 cluster (scripts/lib/cluster.sh, as
# test/http/run.sh does: the installed extension, a tenant role, a tokens
# file; synchronous_commit off, so that commit flushes, which both sides pay
# alike, do not drown the gateway's own cost), then ROUNDS times, for A and
# then B: empties bgexec.job, checkpoints, starts the gateway on a free
# port, runs bench/gateway-load.mjs for each mode in MODES, stops it (by
# pid).  Prints one line per run: requests/s, and the CPU time the gateway
# and the server's processes spent per request (from /proc: less sensitive
# than requests/s to other load on the machine; the load client's own is
# not counted).  Then the median of each binary and mode.  Stops the
# postmaster it started.
#
# Usage: bench/gateway-ab.sh BIN_A BIN_B
# ROUNDS (default 2), MODES (default "get submit"), CLIENTS (default 16),
# RUN_SECONDS (default 10), POOL (the gateways' --pool, default 4).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=../scripts/lib/cluster.sh
source "$root/scripts/lib/cluster.sh"
source "$here/lib.sh"
[[ $# -eq 2 && -x $1 && -x $2 ]] || { echo "usage: bench/gateway-ab.sh BIN_A BIN_B" >&2; exit 2; }
bins=("$1" "$2")
rounds=${ROUNDS:-2}
modes=${MODES:-get submit}
clients=${CLIENTS:-16}
secs=${RUN_SECONDS:-10}
pool=${POOL:-4}

# CPU time (clock ticks) of the gateway $1 and of every server process.
cpu_ticks() {
  local pids
  pids="$1 $postmaster $(pgrep -P "$postmaster" | tr '\n' ' ')"
  # shellcheck disable=SC2086
  for p in $pids; do
    [[ -r /proc/$p/stat ]] && sed 's/^.*) //' "/proc/$p/stat" | awk '{print $12 + $13}'
  done | awk '{s += $1} END {print s + 0}'
}

scratch_dir gwab  # WORK; at exit, the gateway in pids, the cluster and WORK go

tenant_cluster
postmaster=$(cat "$WORK/cluster/postmaster.pid.started")

for round in $(seq 1 "$rounds"); do
  for ab in 0 1; do
    name=$([[ $ab == 0 ]] && echo A || echo B)
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'TRUNCATE bgexec.job' -c 'CHECKPOINT'
    port=$(free_port)
    "${bins[$ab]}" serve --listen "127.0.0.1:$port" --tokens "$WORK/tokens.json" --pool "$pool" \
      >"$WORK/serve-$name.log" 2>&1 &
    gw_pid=$!
    pids=("$gw_pid")
    for _ in $(seq 1 100); do
      curl -sf -o /dev/null "http://127.0.0.1:$port/metrics" && break
      sleep 0.1
    done
    for mode in $modes; do
      t0=$(cpu_ticks "$gw_pid")
      line=$(node "$here/gateway-load.mjs" "http://127.0.0.1:$port" token-a "$mode" "$clients" "$secs")
      t1=$(cpu_ticks "$gw_pid")
      ok=$(sed 's/.*ok=\([0-9]*\).*/\1/' <<<"$line")
      us=$(awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" -v n="$ok" 'BEGIN {printf "%d", t / hz * 1e6 / n}')
      echo "round $round $name $line cpu_us_per_request=$us"
      awk '{print $1 "-" $2, $3}' <<<"$name $line" >>"$WORK/results"
      echo "$name-$mode-cpu_us $us" >>"$WORK/results"
    done
    kill "$gw_pid"
    wait "$gw_pid" 2>/dev/null || true
    pids=()
  done
done
awk "$MEDIAN_AWK"'
  END { for (k in n) printf "median %s %d (%d runs)\n", k, median(k), n[k] }' "$WORK/results" | sort

#!/usr/bin/env bash
# bench/sse-crowd-ab.sh: interleaved A/B of two `bgexec serve` binaries
# under a crowd of readers of one job's event stream (bench/README.md, "The
# fifty-fourth round: one rendering per shared fetch").
#
# Starts a throwaway PostgreSQL 15 cluster (scripts/lib/cluster.sh: the
# installed extension, a tenant role, a tokens file), then ROUNDS times,
# for A and then B: starts the gateway, runs bench/sse-crowd.mjs crowd
# (READERS readers, two 2.5 MB events) and then single (one reader
# replaying EVENTS events of BYTES bytes), and prints them with the
# gateway's VmHWM (peak resident memory) read from /proc before it is
# stopped (by pid).  Stops the postmaster it started.
#
# Usage: bench/sse-crowd-ab.sh BIN_A BIN_B
# ROUNDS (default 3), READERS (default 200), EVENTS (default 20000), BYTES
# (default 500), PORT (the gateways' TCP port, default a free one),
# MEMORY (the gateways' --response-memory in MiB, default theirs: 256).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=../scripts/lib/cluster.sh
source "$root/scripts/lib/cluster.sh"
source "$here/lib.sh"
[[ $# -eq 2 && -x $1 && -x $2 ]] || { echo "usage: bench/sse-crowd-ab.sh BIN_A BIN_B" >&2; exit 2; }
bins=("$1" "$2")
rounds=${ROUNDS:-3}
readers=${READERS:-200}
events=${EVENTS:-20000}
bytes=${BYTES:-500}

gateway_scratch sse-crowd

tenant_cluster
ulimit -n 4096 2>/dev/null || true

for round in $(seq 1 "$rounds"); do
  for ab in 0 1; do
    name=$([[ $ab == 0 ]] && echo A || echo B)
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'TRUNCATE bgexec.job' -c 'CHECKPOINT'
    port=${PORT:-$(free_port)}
    gateway_start "${bins[$ab]}" "$name" "$port" ${MEMORY:+--response-memory "$MEMORY"}
    crowd=$(node "$here/sse-crowd.mjs" "http://127.0.0.1:$port" token-a crowd "$readers")
    hwm=$(awk '/VmHWM/ {print $2}' "/proc/$gw_pid/status")
    single=$(node "$here/sse-crowd.mjs" "http://127.0.0.1:$port" token-a single "$events" "$bytes")
    echo "round $round $name $crowd VmHWM_kB=$hwm | $single | load $(cut -d' ' -f1 /proc/loadavg)"
    kill "$gw_pid"
    wait "$gw_pid" 2>/dev/null || true
    gw_pid=
  done
done

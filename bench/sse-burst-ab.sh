#!/usr/bin/env bash
# bench/sse-burst-ab.sh: interleaved A/B of two `bgexec serve` binaries, one
# request during a burst of event-stream opens by its token (bench/README.md,
# "The fifty-fifth round: a request during a burst of stream opens").
#
# Starts a throwaway PostgreSQL 15 cluster (bench/lib.sh tenant_cluster),
# then ROUNDS times, for A and then B: starts the gateway (default pool of
# 4), runs bench/sse-burst.mjs (STREAMS opens at once; GETs one after
# another from AT ms after them until every stream has its event) and
# prints its line, then stops the gateway (by pid).  Stops the
# postmaster it started.
#
# Usage: bench/sse-burst-ab.sh BIN_A BIN_B
# ROUNDS (default 3), STREAMS (default 1000), AT (default 0), PORT (the
# gateways' TCP port, default a free one).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=../scripts/lib/cluster.sh
source "$root/scripts/lib/cluster.sh"
source "$here/lib.sh"
[[ $# -eq 2 && -x $1 && -x $2 ]] || { echo "usage: bench/sse-burst-ab.sh BIN_A BIN_B" >&2; exit 2; }
bins=("$1" "$2")
rounds=${ROUNDS:-3}
streams=${STREAMS:-1000}
at=${AT:-0}

gateway_scratch sse-burst
tenant_cluster
ulimit -n 8192 2>/dev/null || true

for round in $(seq 1 "$rounds"); do
  for ab in 0 1; do
    name=$([[ $ab == 0 ]] && echo A || echo B)
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'TRUNCATE bgexec.job' -c 'CHECKPOINT'
    port=${PORT:-$(free_port)}
    gateway_start "${bins[$ab]}" "$name" "$port"
    out=$(node "$here/sse-burst.mjs" "http://127.0.0.1:$port" "$streams" "$at")
    echo "round $round $name $out | load $(cut -d' ' -f1 /proc/loadavg)"
    kill "$gw_pid"
    wait "$gw_pid" 2>/dev/null || true
    gw_pid=
  done
done

#!/usr/bin/env bash
# bench/sse-idle-ab.sh: interleaved A/B of two `bgexec serve` binaries with
# idle event streams (bench/README.md, "The fifty-fourth round: idle
# streams and bursts of opens").
#
# Starts a throwaway PostgreSQL 15 cluster (scripts/lib/cluster.sh: the
# installed extension, ROLES tenant roles t1..tN with tokens t1..tN), then
# ROUNDS times, for A and then B: starts the gateway, runs
# bench/sse-idle.mjs (STREAMS streams on JOBS jobs, IDLE seconds idle), and
# prints its line with the gateway's CPU seconds over the whole run (utime +
# stime from /proc), then stops it (by pid).  Stops the postmaster it started.
#
# Usage: bench/sse-idle-ab.sh BIN_A BIN_B
# ROUNDS (default 3), STREAMS (default 1000), JOBS (default 500), ROLES
# (default 1), IDLE (default 15), PORT (the gateways' TCP port, default a free one).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=../scripts/lib/cluster.sh
source "$root/scripts/lib/cluster.sh"
source "$here/lib.sh"
[[ $# -eq 2 && -x $1 && -x $2 ]] || { echo "usage: bench/sse-idle-ab.sh BIN_A BIN_B" >&2; exit 2; }
bins=("$1" "$2")
rounds=${ROUNDS:-3}
streams=${STREAMS:-1000}
jobs=${JOBS:-500}
roles=${ROLES:-1}
idle=${IDLE:-15}

gateway_scratch sse-idle

cluster_start "$WORK/cluster" 5432 "synchronous_commit = off"  # a Unix socket only
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'CREATE EXTENSION bgexec'
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c \
  "DO \$\$BEGIN FOR i IN 1..$roles LOOP EXECUTE format('CREATE ROLE t%s; GRANT bgexec_client TO t%s', i, i); END LOOP; END\$\$" 
python3 -c "import json,sys; print(json.dumps({f't{i}': f't{i}' for i in range(1, $roles + 1)}))" >"$WORK/tokens.json"
ulimit -n 8192 2>/dev/null || true
tck=$(getconf CLK_TCK)

for round in $(seq 1 "$rounds"); do
  for ab in 0 1; do
    name=$([[ $ab == 0 ]] && echo A || echo B)
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'TRUNCATE bgexec.job' -c 'CHECKPOINT'
    port=${PORT:-$(free_port)}
    gateway_start "${bins[$ab]}" "$name" "$port"
    out=$(node "$here/sse-idle.mjs" "http://127.0.0.1:$port" "$streams" "$jobs" "$roles" "$idle")
    cpu=$(awk -v t="$tck" '{printf "%.2f", ($14 + $15) / t}' "/proc/$gw_pid/stat")
    echo "round $round $name $out gateway_cpu_s=$cpu | load $(cut -d' ' -f1 /proc/loadavg)"
    kill "$gw_pid"
    wait "$gw_pid" 2>/dev/null || true
    gw_pid=
  done
done

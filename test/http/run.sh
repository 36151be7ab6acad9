#!/usr/bin/env bash
# Tests of `bgexec serve`: starts a throwaway PostgreSQL cluster with the
# extension, two tenant roles and a tokens file, starts the gateway on a free
# port, and runs the node:test files next to this script against it.
# Usage: test/http/run.sh [node --test args, e.g. a file name]
# BGEXEC_BIN overrides the binary (default daemon/build/bgexec).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../../scripts/lib/cluster.sh
source "$root/scripts/lib/cluster.sh"

export BGEXEC_BIN=${BGEXEC_BIN:-$root/daemon/build/bgexec}
[[ -x $BGEXEC_BIN ]] || { echo "run.sh: $BGEXEC_BIN not built (scripts/build-daemon.sh)" >&2; exit 2; }

work=$(mktemp -d /tmp/bgexec-http.XXXXXX)
chmod 755 "$work"
gw_pid=
cleanup() {
  [[ -n $gw_pid ]] && kill "$gw_pid" 2>/dev/null || true
  cluster_stop "$work/pg"
  rm -rf "$work"
}
trap cleanup EXIT

# fsync off: a stalled fsync on this shared disk is no test of the gateway
# (Its port only names the socket in its private directory: cluster_start.)
cluster_start "$work/pg" 5432 "fsync = off"
psql -X -q -v ON_ERROR_STOP=1 -d postgres <<'SQL'
CREATE EXTENSION bgexec;
CREATE ROLE tenant_a;
CREATE ROLE tenant_b;
GRANT bgexec_client TO tenant_a, tenant_b;
SQL

cat >"$work/tokens.json" <<'EOF2'
{"token-a": "tenant_a", "token-b": "tenant_b"}
EOF2
export BGEXEC_TOKENS=$work/tokens.json
export BGEXEC_WORK=$work

# Port 0: the kernel picks one, and the gateway logs it (msg=serving listen=).
"$BGEXEC_BIN" serve --listen "127.0.0.1:0" --tokens "$BGEXEC_TOKENS" >"$work/serve.log" 2>&1 &
gw_pid=$!
for _ in $(seq 1 100); do
  listen=$(sed -n 's/.*msg=serving listen=\([0-9.:]*\).*/\1/p' "$work/serve.log" | head -1)
  [[ -n $listen ]] && curl -sf -o /dev/null "http://$listen/metrics" && break
  kill -0 "$gw_pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
  sleep 0.1
done
export BGEXEC_URL=http://$listen BGEXEC_GW_PID=$gw_pid

cd "$here"
# Node.js 20 or later (Playwright's minimum): scripts/deps.sh puts one in
# build/node where the one installed is older (Debian 12's is 18.20).
if [[ -x $root/build/node/bin/node ]] &&
   ! node -e 'process.exit(+process.versions.node.split(".")[0] < 20 ? 1 : 0)' 2>/dev/null; then
  PATH=$root/build/node/bin:$PATH
fi
[[ -d node_modules/eventsource && -d node_modules/playwright-core ]] || npm ci --no-audit --no-fund >/dev/null
files=("$@")
[[ ${#files[@]} -gt 0 ]] || files=(./*.test.mjs)
status=0
node --test --test-concurrency=1 --test-reporter=spec "${files[@]}" || status=$?
if [[ $status -ne 0 ]]; then
  echo "--- gateway log (tail) ---" >&2
  tail -n 30 "$work/serve.log" >&2
fi
exit $status

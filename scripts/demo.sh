#!/usr/bin/env bash
# `make demo`: a workflow end to end, watched live.  Installs missing packages,
# builds the extension and the daemon, starts a throwaway PostgreSQL cluster
# and two workers, submits demo/workflow.json (an action, parallel branches, a
# step that logs, a step its "if" skips, an approval, an sql step writing a
# table), follows it, approves it when it suspends, follows it to completion,
# prints the result, and stops exactly what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# What building and running need, not the test suites' tools (a browser,
# pgbouncer, GoogleTest, Node.js): the demo uses none of them.
scripts/deps.sh --build
echo "== building the extension and the daemon, and installing both (make install: a few minutes the first time)"
make -s install >/dev/null
BIN=$ROOT/daemon/build/bgexec

PORT=${BGEXEC_DEMO_PORT:-55433}
source scripts/lib/cluster.sh
scratch_dir demo

echo "== starting a throwaway PostgreSQL 15 cluster on port $PORT"
cluster_start "$WORK/cluster" "$PORT"
psql -X -q -v ON_ERROR_STOP=1 postgres <<'SQL'
CREATE EXTENSION bgexec;
CREATE TABLE demo_orders_loaded (id serial PRIMARY KEY, day date, line_count int, checksum text,
                                 loaded_at timestamptz DEFAULT now());
SQL

chmod 1777 "$WORK"
for n in 1 2; do
  echo "== starting worker demo-$n"
  TMPDIR=$WORK "$BIN" worker --id "demo-$n" --concurrency 4 --lease 10 --allow-run \
    --action "export-orders=$ROOT/demo/actions/export-orders" \
    2>"$WORK/worker-$n.log" &
  pids+=($!)
done

# The workers register before the job is submitted, so the submit finds
# them live (else it notes, rightly, that no worker claims from the queue).
for _ in $(seq 1 300); do
  [[ $(psql -X -qAt -c "SELECT count(*) FROM bgexec.worker_stats WHERE alive AND id LIKE 'demo-%'" postgres) == 2 ]] && break
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null || { echo "a worker exited:" >&2; cat "$WORK"/worker-*.log >&2; exit 1; }
  done
  sleep 0.1
done

echo "== submitting demo/workflow.json and following it live"
echo "   ([N] is the event's seq; '> a' step a started, 'ok a' its output, 'a|stderr|' its log lines)"
echo
rc=0
"$BIN" submit workflow @demo/workflow.json --follow || rc=$?
# Its approval step suspends it (exit 5): no worker holds it while it
# waits, for as long as it takes.  The demo approves it, as a person would.
if ((rc == 5)); then
  id=$(psql -X -qAt -c "SELECT max(id) FROM bgexec.job" postgres)
  seq=$(psql -X -qAt -c "SELECT last_seq FROM bgexec.job WHERE id = $id" postgres)
  echo
  echo "== job $id waits for an approval, held by no worker; approving it:"
  echo "   bgexec resume $id '{\"approved_by\": \"demo\"}'"
  "$BIN" resume "$id" '{"approved_by": "demo"}'
  echo "== following it again, after event $seq (bgexec tail $id --from $seq)"
  echo
  rc=0
  "$BIN" tail "$id" --from "$seq" || rc=$?
fi
echo
echo "== the table the sql step wrote"
psql -X -P pager=off -c "SELECT id, day, line_count, checksum FROM demo_orders_loaded" postgres
echo "== the job"
psql -X -P pager=off -c "SELECT id, status, attempt, jsonb_pretty(result) AS result FROM bgexec.job" postgres
echo "== worker logs (first lines)"
head -n 5 "$WORK"/worker-*.log
exit $rc

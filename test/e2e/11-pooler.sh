#!/usr/bin/env bash
# Behind PgBouncer in transaction mode: the worker's hot calls are prepared
# statements, and such a pooler (1.18, Debian 12's) hands each transaction to
# any server connection, so a statement prepared on one is missing on the
# next (SQLSTATE 26000).  The worker must notice, run the text instead and
# lose nothing: every job completes exactly once, no call fails.  LISTEN does
# not survive transaction pooling either; the worker finds work by polling.
source "$(dirname "$0")/lib.sh"
PGBOUNCER=${PGBOUNCER:-/usr/sbin/pgbouncer}
[[ -x $PGBOUNCER ]] || fail "no pgbouncer at $PGBOUNCER (scripts/deps.sh installs it)"
e2e_cluster 57951

B=$E2E_DIR/pgbouncer
mkdir -p "$B"
echo '"postgres" ""' >"$B/users.txt"
as=()
if [[ $(id -u) -eq 0 ]]; then
  chown -R postgres:postgres "$B"
  as=(runuser -u postgres --)
fi
# A port the kernel says is free; picked again if another program on the
# host takes it first (pgbouncer then exits: it could not listen).
for try in 1 2 3 4 5; do
  port=$(free_port)
  cat >"$B/pgbouncer.ini" <<EOF
[databases]
postgres = host=$E2E_DIR/pg port=$PGPORT dbname=postgres user=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $B/users.txt
pool_mode = transaction
; two server connections for the worker's four: transactions move between them
default_pool_size = 2
max_client_conn = 50
pidfile = $B/pgbouncer.pid
logfile = $B/pgbouncer.log
EOF
  "${as[@]}" "$PGBOUNCER" "$B/pgbouncer.ini" >"$E2E_DIR/pgbouncer.out" 2>&1 &
  pgb=$!
  E2E_PIDS+=("$pgb")
  POOLED="host=127.0.0.1 port=$port dbname=postgres user=postgres"
  wait_for 10 psql -qXAt "$POOLED" -c "SELECT 1" && break
  kill -0 "$pgb" 2>/dev/null && fail "pgbouncer did not answer"
  ((try < 5)) || fail "pgbouncer did not start"
done
# runuser's child is pgbouncer itself: cleanup kills it by its own pid.
E2E_PIDS+=("$(cat "$B/pgbouncer.pid")")

# A lease far above the test's times: heartbeats queue behind the pool's two
# server connections, and this test checks that no worker call failed.
start_worker w1 --db "$POOLED" --concurrency 8 --poll 0.2 --allow-run --lease 10
n=300
sql "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop')) FROM generate_series(1, $n)))" >/dev/null
wf=$("$BGEXEC" submit workflow '{"steps": [{"id": "a", "run": ["echo", "one"]}, {"id": "b", "needs": ["a"], "run": ["echo", "two"]}]}')
done_all() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE status = 'completed'") == $((n + 1)) ]]; }
wait_for 60 done_all || fail "$(sql "SELECT count(*) FROM bgexec.job WHERE status = 'completed'") of $((n + 1)) jobs completed"

# Exactly once: one started and one terminal event per job, first attempt.
dups=$(sql "SELECT count(*) FROM bgexec.job j WHERE j.attempt <> 1
              OR (SELECT count(*) FROM bgexec.job_event e WHERE e.job_id = j.id AND e.kind = 'started') <> 1
              OR (SELECT count(*) FROM bgexec.job_event e WHERE e.job_id = j.id AND e.kind = 'completed') <> 1")
[[ $dups == 0 ]] || fail "$dups jobs not run exactly once"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $wf AND kind = 'step_completed'") == 2 ]] \
  || fail "workflow steps not both recorded"
! grep -E 'level=(warn|error) msg="(claim|heartbeat|finish batch|database call) failed' "$E2E_DIR/w1.log" \
  || fail "a worker call failed behind the pooler"
# Informational: whether this run met a missing prepared statement at all.
if grep -q 'prepared statements unavailable' "$E2E_DIR/w1.log"; then
  ok "fell back to text statements behind transaction pooling"
else
  ok "no prepared statement went missing in this run"
fi

#!/usr/bin/env bash
# A fleet short of connection slots must not deadlock.  6 workers need 24
# sessions (4 each: control, finish, heartbeat, listen); the server restarts
# with room for 9 of theirs (max_connections 12, 3 reserved for superusers),
# as when a DBA lowers max_connections or the fleet fails over to a smaller
# server.  Before: the 9 slots went to whichever sessions reconnected first,
# spread over every worker (listen and control kept while not claiming), no
# worker had its finish session, and nothing completed; jobs claimed just
# before a worker noticed its finish session was gone stayed `running`.
# After: a worker without its finish and heartbeat sessions gives back the
# others (and, with no job in flight, the one of the two it got), reopens
# them finish first with a jittered backoff, so slots flow to workers that
# can complete their set: every job completes, none stays running.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58035 "superuser_reserved_connections = 3"
sql "CREATE ROLE bgexec_w LOGIN" >/dev/null
sql "GRANT bgexec_worker TO bgexec_w" >/dev/null
pids=()
for i in 1 2 3 4 5 6; do
  PGUSER=bgexec_w PGDATABASE=postgres start_worker "w$i" --concurrency 1 --lease 10
  pids+=("$WORKER_PID")
done
sessions() { sql "SELECT count(*) FROM pg_stat_activity WHERE usename = 'bgexec_w'"; }
wait_for 30 bash -c "[[ \$(psql -XAtc \"SELECT count(*) FROM pg_stat_activity WHERE usename = 'bgexec_w'\") -ge 18 ]]" \
  || fail "the workers did not connect ($(sessions) sessions)"
first=$(sql "SELECT bgexec.submit('noop')")
wait_status "$first" completed 20

# max_connections 300 -> 12: 9 slots for the fleet's 24 sessions.
echo "max_connections = 12" >>"$E2E_DIR/pg/data/postgresql.conf"
cluster_restart "$E2E_DIR/pg" || fail "restart"
echo "# restarted with max_connections = 12" >&2
sleep 3
sql "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop'))
     FROM generate_series(1, 40)))" >/dev/null
left() { sql "SELECT count(*) FROM bgexec.job WHERE status <> 'completed'"; }
wait_for 120 bash -c "[[ \$(psql -XAtc \"SELECT count(*) FROM bgexec.job WHERE status <> 'completed'\") == 0 ]]" \
  || fail "$(left) jobs not completed after 120 s: $(sql "SELECT string_agg(status || '=' || n, ' ')
      FROM (SELECT status, count(*) n FROM bgexec.job GROUP BY 1 ORDER BY 1) s"); $(sessions) sessions"
for p in "${pids[@]}"; do kill -0 "$p" || fail "a worker exited"; done
grep -q "not claiming" "$E2E_DIR"/w*.log || fail "no worker was short of sessions (the test tests nothing)"
ok "41 jobs completed with 9 slots for 6 workers' 24 sessions"

#!/usr/bin/env bash
# A synchronous standby that has gone: every commit waits for it, and a
# worker's calls time out.  The worker dropped the connection without
# cancelling the statement; the backend, waiting for the standby, never
# noticed its client had gone, and the worker's next connection did the
# same: ten backends a minute per worker, until the server's connections
# ran out for everyone.  The call's deadline now cancels the statement
# before it closes the connection, and the backend ends.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57938
start_worker w1 --allow-run
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "s", "run": ["sleep", "120"]}]}') || fail submit
wait_status "$id" running 20
sql "ALTER SYSTEM SET synchronous_standby_names = 'gone'" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
waiting() { sql "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND application_name LIKE 'bgexec worker%'"; }
some_waiting() { (($(waiting) >= 1)); }
wait_for 20 some_waiting || true
sleep 20
n=$(waiting)
all=$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'bgexec worker%'")
sql "ALTER SYSTEM RESET synchronous_standby_names" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
grep -q "lease could not be renewed\|database unavailable\|did not answer" "$E2E_DIR/w1.log" \
  || fail "the worker's calls did not time out: the test did not test anything"
# The worker holds 4 connections; one per connection may be between its
# cancel and its end at any moment.
((all <= 8)) || fail "after 20 s of commits that never return the worker had $all backends ($n waiting for the standby)"
ok "after 20 s of commits that never return the worker had $all backends ($n waiting for the standby)"

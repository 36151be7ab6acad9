#!/usr/bin/env bash
# LISTEN mode (await_claim unavailable), a long poll: after a PostgreSQL
# restart the notifier LISTENs again, so a job submitted later is claimed on
# its NOTIFY, not at the next poll, 30 s on (the mutation run of the daemon
# found no test: the 1 s default poll hid a LISTEN made only once).
source "$(dirname "$0")/lib.sh"
e2e_cluster 57933
start_worker w1 --poll 30
wait_for 10 grep -q 'msg=listening via=await_claim' "$E2E_DIR/w1.log" || fail "not waiting"
# Into the LISTEN fallback, as 26-notifier-recheck does; await_claim is
# tried again only after a minute.
sql "DROP EXTENSION bgexec CASCADE" >/dev/null
wait_for 20 grep -q 'msg=listening channels' "$E2E_DIR/w1.log" || fail "no LISTEN fallback"
sql "CREATE EXTENSION bgexec" >/dev/null
cluster_restart "$E2E_DIR/pg" >/dev/null || fail restart
relistened() { (($(grep -c 'msg=listening channels' "$E2E_DIR/w1.log") >= 2)); }
wait_for 30 relistened || fail "the notifier did not come back"
sleep 2   # past the claim the reconnect itself makes
id=$("$BGEXEC" submit noop) || fail submit
# (within 15 s: the poll, 30 s, last ran at least 2 s before the submit)
wait_status "$id" completed 15
ok "after a restart the job was claimed on its NOTIFY"

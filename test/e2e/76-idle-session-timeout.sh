#!/usr/bin/env bash
# A database with idle_session_timeout (here 1 s) ends the worker's idle
# sessions between its calls: its finish connection between two jobs, its
# heartbeat connection between two heartbeats.  Each call found its session
# dead: the worker logged warnings ("heartbeat failed", "database call
# failed, retrying"), stopped claiming until the connection came back, and
# cancelled its waiting claim.  Now a session the server ended while idle is
# opened again before the call: the jobs run as usual, and nothing is logged
# above info.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57927
sql "ALTER DATABASE postgres SET idle_session_timeout = '1s'" >/dev/null
start_worker w1 --lease 10
wait_for 20 grep -q 'msg=listening' "$E2E_DIR/w1.log" || fail "w1 did not listen"
for _ in 1 2 3; do
  sleep 2.5   # past the timeout: the finish and heartbeat sessions are ended
  id=$("$BGEXEC" submit noop) || fail submit
  wait_status "$id" completed 10
done
if grep -q 'level=warn\|level=error' "$E2E_DIR/w1.log"; then
  fail "warnings: $(grep 'level=warn\|level=error' "$E2E_DIR/w1.log" | head -5)"
fi
reopened=$(grep -c 'msg="session ended by the server while idle, connecting again"' "$E2E_DIR/w1.log" || true)
((reopened >= 3)) || fail "sessions ended while idle were opened again $reopened times: the case was not set up"
grep -q 'reason="terminating connection due to idle-session timeout (57P05)"' "$E2E_DIR/w1.log" \
  || fail "the reason is not the server's: $(grep -m1 'session ended' "$E2E_DIR/w1.log")"
kill -0 "$PID_w1" || fail "worker exited"
ok "sessions ended by idle_session_timeout were opened again $reopened times, without a warning"

#!/usr/bin/env bash
# Something between the worker and the server (a load balancer's or a
# firewall's idle timeout) closes sessions that sit idle, without a word:
# no FATAL first, as idle_session_timeout sends (e2e 76), only the close.
# The worker's control, finish and heartbeat sessions, idle between their
# calls, are opened again before the next call ("session ended by the
# server while idle, connecting again", reason "the server closed the
# connection"), and nothing is logged above info.  A proxy plays the
# timeout (idle-close-proxy.py): a session whose last message from the
# server was ReadyForQuery and that has sent nothing since is closed after
# 1 s (a session waiting in a query, await_claim's, is not idle).
source "$(dirname "$0")/lib.sh"
e2e_cluster 58004
start_proxy idle-close-proxy.py "$E2E_DIR/closed"
start_worker w1 --db "$PROXIED" --lease 10
wait_for 20 grep -q 'msg=listening' "$E2E_DIR/w1.log" || fail "w1 did not listen"
for _ in 1 2 3; do
  sleep 2.5   # past the proxy's 1 s: the idle sessions are closed
  id=$("$BGEXEC" submit noop) || fail submit
  wait_status "$id" completed 10
done
[[ -s $E2E_DIR/closed ]] || fail "the proxy closed no idle session: the case was not set up"
if grep -q 'level=warn\|level=error' "$E2E_DIR/w1.log"; then
  fail "warnings: $(grep 'level=warn\|level=error' "$E2E_DIR/w1.log" | head -5)"
fi
reopened=$(grep -c 'msg="session ended by the server while idle, connecting again".*reason="the server closed the connection"' \
  "$E2E_DIR/w1.log" || true)
((reopened >= 3)) || fail "sessions closed while idle were opened again $reopened times: $(grep -m3 'session ended' "$E2E_DIR/w1.log")"
kill -0 "$PID_w1" || fail "worker exited"
ok "sessions closed while idle, without a word, were opened again $reopened times, without a warning"

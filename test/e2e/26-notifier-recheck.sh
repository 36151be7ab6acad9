#!/usr/bin/env bash
# A worker that fell back to LISTEN (await_claim unavailable: the extension
# dropped and created again, bgexec not yet preloaded) tries await_claim
# again each minute: it stayed on LISTEN for the life of the process, at
# many times the commits per job.  And a notifier error that comes at once
# each time backs off to its cap (5 s), not ten retries a second: here a
# worker whose role defaults to REPEATABLE READ, which a capped queue's
# claim refuses.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57967
start_worker w1 --queue rq
wait_for 10 grep -q 'msg=listening via=await_claim' "$E2E_DIR/w1.log" || fail "w1 does not wait in await_claim"
sql "DROP EXTENSION bgexec CASCADE" >/dev/null
wait_for 20 grep -q 'await_claim unavailable, listening instead' "$E2E_DIR/w1.log" || fail "w1 did not fall back to LISTEN"
sql "CREATE EXTENSION bgexec" >/dev/null
back_in_await() { (($(grep -c 'msg=listening via=await_claim' "$E2E_DIR/w1.log") >= 2)); }
wait_for 90 back_in_await \
  || fail "w1 did not go back to await_claim: $(grep -a 'listening\|unavailable' "$E2E_DIR/w1.log" | tail -3)"
id=$("$BGEXEC" submit noop --queue rq) || fail submit
wait_status "$id" completed 20
[[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bgexec worker listen' AND query LIKE 'LISTEN%'") == 0 ]] \
  || fail "w1's listen connection still LISTENs"
kill -TERM "$PID_w1"; wait "$PID_w1" || true

# REPEATABLE READ by default on a capped queue: refused claims back off
sql "SELECT bgexec.configure_queue('cap', max_running => 1)" >/dev/null
sql "CREATE ROLE e2e_rr LOGIN; GRANT bgexec_worker TO e2e_rr;
     ALTER ROLE e2e_rr SET default_transaction_isolation = 'repeatable read'" >/dev/null
"$BGEXEC" worker --id rr --lease 2 --queue cap --db "dbname=postgres user=e2e_rr" >>"$E2E_DIR/rr.log" 2>&1 &
RR=$!
E2E_PIDS+=("$RR")
sleep 12
n=$(grep -c 'notifier disconnected' "$E2E_DIR/rr.log" || true)
((n >= 1 && n <= 8)) || fail "refused claims in 12 s: $n notifier lines (expected a backoff to 5 s)"
kill -TERM "$RR"; wait "$RR" || true
ok

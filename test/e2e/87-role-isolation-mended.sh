#!/usr/bin/env bash
# A worker whose login role defaults to REPEATABLE READ cannot claim from a
# queue with caps (0A000, claim only in a READ COMMITTED transaction); the
# README's fix, ALTER ROLE … SET default_transaction_isolation = 'read
# committed', is read by a session when it logs in.  The worker closes the
# sessions such a claim failed on, so it picks the fix up without a
# restart: it kept them, and went on failing until restarted.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58006
sql "CREATE ROLE bgw LOGIN; GRANT bgexec_worker TO bgw;
     ALTER ROLE bgw SET default_transaction_isolation = 'repeatable read'" >/dev/null
sql "SELECT bgexec.configure_queue('rc', max_running => 2)" >/dev/null
id=$(sql "SELECT bgexec.submit('noop', queue => 'rc')")
start_worker w --db "user=bgw dbname=postgres" --queue rc
wait_for 30 grep -q 'has caps: claim from it only in a READ COMMITTED transaction' "$E2E_DIR/w.log" \
  || fail "no refused claim: $(tail -5 "$E2E_DIR/w.log")"
status_is "$id" queued || fail "job $id: $(job_status "$id")"
sql "ALTER ROLE bgw SET default_transaction_isolation = 'read committed'" >/dev/null
wait_status "$id" completed 30
kill -0 "$PID_w" || fail "the worker exited"
ok

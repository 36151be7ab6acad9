#!/usr/bin/env bash
# The worker's own sessions run with no statement_timeout, lock_timeout or
# idle_in_transaction_session_timeout, whatever its role, its database or
# the server's configuration sets: its calls are bounded by the worker
# (call timeouts), its functions set their own lock_timeout.  A DBA's
# `ALTER ROLE worker SET statement_timeout = '2s'` cancelled a finish that
# took longer (a result of megabytes), and the finish, made again while
# heartbeats renewed the lease (57014 is transient), was cancelled each
# time: the job stayed running, a warning logged each time.  The finish is
# slowed here by a trigger (0.5 s) past the role's statement_timeout
# (200 ms).
source "$(dirname "$0")/lib.sh"
e2e_cluster 58014
cat >"$E2E_DIR/act.sh" <<SH
#!/bin/sh
cat >/dev/null
echo '{"ok": true}'
SH
chmod +x "$E2E_DIR/act.sh"
sql "CREATE ROLE bgw LOGIN; GRANT bgexec_worker TO bgw;
     ALTER ROLE bgw SET statement_timeout = '200ms';
     ALTER ROLE bgw SET lock_timeout = '100ms';
     ALTER ROLE bgw SET idle_in_transaction_session_timeout = '300ms'" >/dev/null
sql "CREATE FUNCTION public.slow_event() RETURNS trigger LANGUAGE plpgsql AS \$\$
       BEGIN PERFORM pg_sleep(0.5); RETURN NEW; END \$\$;
     CREATE TRIGGER slow_event BEFORE INSERT ON bgexec.job_event FOR EACH ROW
       WHEN (NEW.kind = 'completed') EXECUTE FUNCTION public.slow_event()" >/dev/null
start_worker w1 --db "user=bgw dbname=postgres" --lease 4 --action "act=$E2E_DIR/act.sh"
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/w1.log" || fail "worker did not start"
id=$("$BGEXEC" submit act '{}') || fail submit
wait_status "$id" completed 20
[[ $(sql "SELECT result::text LIKE '%\"ok\": true%' FROM bgexec.job WHERE id = $id") == t ]] \
  || fail "job $id's result: $(sql "SELECT result, error FROM bgexec.job WHERE id = $id")"
! grep -q 'sqlstate=57014' "$E2E_DIR/w1.log" || fail "a call of the worker was cancelled"
# The conninfo's own options still win: a worker whose --db sets
# statement_timeout keeps it (its finish is cancelled, and made again).
start_worker w2 --db "user=bgw dbname=postgres options='-c statement_timeout=150ms'" --lease 4 \
  --action "act=$E2E_DIR/act.sh"
kill "$PID_w1"
wait "$PID_w1" 2>/dev/null || true
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/w2.log" || fail "worker w2 did not start"
id2=$("$BGEXEC" submit act '{}') || fail submit
wait_for 20 grep -q 'msg="database call failed, retrying".*sqlstate=57014' "$E2E_DIR/w2.log" \
  || fail "w2's finish was not cancelled: job $id2 $(job_status "$id2")"
kill -0 "$PID_w2" || fail "worker exited"
# Its claim too waits for a lock as long as it takes, whatever the role's
# lock_timeout (100 ms): a claim of a capped queue waits for the claimers
# before it (their advisory lock, held here 2 s by another session), and
# with the role's lock_timeout it failed (55P03) until the lock was gone.
# (Mutation test, round 54: a reset of statement_timeout and
# idle_in_transaction_session_timeout alone passed the sections above.)
# Its options name deadlock_timeout (granted to it), which is not
# lock_timeout: the role's lock_timeout is still reset.
kill -9 "$PID_w2"  # its finish of job $id2 is cancelled for as long as it drains
wait "$PID_w2" 2>/dev/null || true
sql "SELECT (bgexec.configure_queue('capq', max_running => 10)).name" >/dev/null
sql "GRANT SET ON PARAMETER deadlock_timeout TO bgw" >/dev/null
start_worker w3 --db "user=bgw dbname=postgres options='-c deadlock_timeout=1s'" --lease 4 --queue capq --action "act=$E2E_DIR/act.sh"
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/w3.log" || fail "worker w3 did not start"
psql -qXAt -c "BEGIN;
  SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('bgexec.claim'), pg_catalog.hashtext('capq'));
  SELECT pg_sleep(2); COMMIT" >/dev/null &
holder=$!
sleep 0.5
id3=$("$BGEXEC" submit act '{}' --queue capq) || fail submit
wait "$holder"
wait_status "$id3" completed 20
! grep -qE 'sqlstate=55P03|due to lock timeout' "$E2E_DIR/w3.log" \
  || fail "a claim of w3's failed on its role's lock_timeout: $(grep -m1 'lock timeout' "$E2E_DIR/w3.log")"
ok

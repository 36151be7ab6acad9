#!/usr/bin/env bash
# A job row another transaction holds (a client's stop() in a transaction it
# keeps open) holds up only that job's finish.  finish_many meets the lock
# (55P03 after its 500 ms lock_timeout); the worker writes the batch's other
# items without it, one by one, and puts the held one back in its queue, again
# and again while the row stays locked (a batch of that item alone meets the
# lock too).  Once the transaction ends, the job completes, on its first
# attempt, under the lease it was claimed with.
# Setup: --finish-delay 5 keeps noop job A's finish in the worker's batch
# window for 5 s (B, a long sleep, keeps the window from closing early); the
# test locks A's row in that window, then submits noop job C, whose finish
# joins A's batch.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57931

start_worker w1 --queue held --concurrency 3 --lease 60 --finish-delay 5 --poll 0.5
wait_for 10 grep -q 'msg=listening' "$E2E_DIR/w1.log" || fail "w1 did not listen"
hold_open

b=$("$BGEXEC" submit workflow --queue held '{"steps": [{"id": "s", "sleep": 120}]}') || fail "submit B"
wait_status "$b" running 15
a=$(sql "SELECT bgexec.submit('noop', '{}', 'held')")
wait_status "$a" running 15
hold "SELECT 'row-lock', id FROM bgexec.job WHERE id = $a FOR UPDATE;"
wait_for 10 held row-lock || fail "the test's session did not lock A: $(cat "$E2E_DIR/hold.out")"
[[ $(job_status "$a") == running ]] \
  || fail "A was $(job_status "$a") when its row was locked: its finish did not wait for the batch window"
c=$(sql "SELECT bgexec.submit('noop', '{}', 'held')")

# C's finish is written while A's row is held; A's is not.
wait_for 30 status_is "$c" completed || fail "C is $(job_status "$c") while A's row is held"
[[ $(job_status "$a") == running ]] || fail "A is $(job_status "$a") while its row is held"
grep -q 'msg="finish batch failed, finishing its items one by one".*sqlstate=55P03 items=2' "$E2E_DIR/w1.log" \
  || fail "A and C were not finished together, then one by one"
# A's finish tried again alone, in a batch of its own, until its
# lock_timeout: it is put back once more (the path of a batch of one).  The
# server logs each timeout: the batch of two, A alone as the batch was
# split, then this one.  (Nothing else here waits on a lock with a timeout:
# A, a noop, appends no events, and the heartbeat skips a held row.)
lock_timeouts() { grep -c 'canceling statement due to lock timeout' "$E2E_DIR/pg/postgres.log" || true; }
third_timeout() { (($(lock_timeouts) >= 3)); }
wait_for 30 third_timeout || fail "A's finish was not tried again while its row was held ($(lock_timeouts) lock timeouts)"
[[ $(job_status "$a") == running ]] || fail "A is $(job_status "$a") while its row is held"
hold "COMMIT;"
exec 7>&-

wait_for 30 status_is "$a" completed || fail "A is $(job_status "$a") after its row was released"
ev() { sql "SELECT string_agg(kind, ' ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $1"; }
[[ $(ev "$a") == "started completed" ]] || fail "A's events: $(ev "$a")"
[[ $(ev "$c") == "started completed" ]] || fail "C's events: $(ev "$c")"
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $a") == 1 ]] || fail "A was claimed again"
grep -q 'abandoning job' "$E2E_DIR/w1.log" && fail "the worker abandoned a job: $(grep 'abandoning' "$E2E_DIR/w1.log")"
wait_for 10 grep -q "msg=\"job finished\" job_id=$a outcome=completed status=completed" "$E2E_DIR/w1.log" \
  || fail "the worker did not log A's finish as written"
ok "a held job row delayed its own finish only, and it completed once released"

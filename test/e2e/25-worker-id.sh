#!/usr/bin/env bash
# One live process per worker id.  Leases, heartbeat and unclaim go by the
# id: a second process under a live worker's id, once registered, had the
# first's running job given back by its unclaim and ran it again beside
# the first.  Now the second waits, claiming nothing, until the id is free;
# a holder gone from this host (kill -9) frees it at once, not after its
# lease (30 s here).
source "$(dirname "$0")/lib.sh"
e2e_cluster 57966
M=$E2E_DIR/marks
mkdir -p "$M"
chmod 777 "$M"

start_worker first --allow-run --queue dq --lease 30
wait_for 20 grep -q 'worker started' "$E2E_DIR/first.log" || fail "first did not start"
# the same id, another queue: what the duplicate would have unclaimed
"$BGEXEC" worker --id first --lease 30 --allow-run --queue other >>"$E2E_DIR/second.log" 2>&1 &
SECOND=$!
E2E_PIDS+=("$SECOND")
wait_for 20 grep -q 'worker id in use by a live worker: waiting' "$E2E_DIR/second.log" \
  || fail "the second process did not wait: $(tail -3 "$E2E_DIR/second.log")"
grep -q "holder=\"pid $PID_first on host $(hostname)" "$E2E_DIR/second.log" || fail "the holder is not named: $(grep waiting "$E2E_DIR/second.log")"
id=$("$BGEXEC" submit workflow --queue dq '{"steps": [{"id": "s", "run": ["sh", "-c", "echo run >> '"$M"'/runs; sleep 4"]}]}') || fail submit
other=$("$BGEXEC" submit noop --queue other) || fail submit
wait_status "$id" completed 30
sleep 1
[[ $(job_status "$other") == queued ]] || fail "the waiting process claimed job $other"
[[ $(wc -l <"$M/runs") == 1 ]] || fail "the step ran $(wc -l <"$M/runs") times"
[[ $(sql "SELECT pid FROM bgexec.worker WHERE id = 'first'") == "$PID_first" ]] || fail "the worker row changed hands"
! grep -q 'worker started' "$E2E_DIR/second.log" || fail "the second process started"
# the first is killed: its id is taken over at once, not after its lease
kill -9 "$PID_first"
wait "$PID_first" 2>/dev/null || true
wait_for 10 grep -q 'worker id held by a process gone from this host: taking it over' "$E2E_DIR/second.log" \
  || fail "no takeover: $(tail -3 "$E2E_DIR/second.log")"
wait_status "$other" completed 10
[[ $(sql "SELECT pid FROM bgexec.worker WHERE id = 'first'") == "$SECOND" ]] || fail "the worker row is not the second's"
# Someone deletes the row while a third process waits for the id: the third
# takes it; the second, which does not know yet, claims nothing more (its
# claims name it, and the row names the third: refused), is told by its
# heartbeat, drains and exits 3, leaving the third's row as it is.  The
# third serves another queue, so a job on the second's queue is one only
# the second could claim: before, its claim in the wait took the job, under
# the id the third now held, whose unclaim could give it back mid-run.
# (the second is stopped meanwhile, so that its heartbeat cannot register
# the row again before the third does: a few seconds, well inside its lease)
take_id first "$SECOND" "$E2E_DIR/third.log" --lease 30 --queue third
THIRD=$TAKER
late=$("$BGEXEC" submit noop --queue other) || { kill -CONT "$SECOND"; fail submit; }
sleep 0.5
kill -CONT "$SECOND"
wait_for 30 grep -q 'worker stopped' "$E2E_DIR/second.log" || fail "the second did not stop: $(tail -3 "$E2E_DIR/second.log")"
set +e; wait "$SECOND"; rc=$?; set -e
((rc == 3)) || fail "the second exited $rc, expected 3"
grep -q "worker id taken by another live process: draining" "$E2E_DIR/second.log" \
  || fail "no log line: $(tail -3 "$E2E_DIR/second.log")"
[[ $(sql "SELECT pid, stopped_at IS NULL FROM bgexec.worker WHERE id = 'first'") == "$THIRD|t" ]] \
  || fail "the third's row: $(sql "SELECT * FROM bgexec.worker WHERE id = 'first'")"
[[ $(job_status "$late") == queued && $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $late") == 0 ]] \
  || fail "the second claimed job $late under the third's id: $(sql "SELECT status, attempt FROM bgexec.job WHERE id = $late")"
kill -TERM "$THIRD"; wait "$THIRD" || fail "third exit status $?"
ok

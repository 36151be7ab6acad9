#!/usr/bin/env bash
# A worker whose every slot is busy claims nothing, so no claim of its can be
# refused: its heartbeat alone learns that another process took its id (the
# heartbeat's 'holder' row, when the worker row names another process).  It
# must stop then, within a heartbeat or two, not when its job ends: two live
# processes under one id are what register_worker exists to prevent.
# Setup as in 25-worker-id's last part: the busy worker is stopped, its row
# deleted, a process waiting for the id registers it, and the busy one is
# continued.  The waiting one serves another queue, so it cannot take the
# busy one's job.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57929

start_worker busy --allow-run --queue bq --concurrency 1 --lease 8 --grace 1
wait_for 20 grep -q 'msg=listening' "$E2E_DIR/busy.log" || fail "busy did not start"
job=$("$BGEXEC" submit workflow --queue bq '{"steps": [{"id": "s", "sleep": 120}]}') || fail submit
step_started() { [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $job AND kind = 'step_started'") == 1 ]]; }
wait_for 20 step_started || fail "the job did not start: $(job_status "$job")"

take_id busy "$PID_busy" "$E2E_DIR/taker.log" --lease 8 --queue other
kill -CONT "$PID_busy"
continued=$SECONDS

# Told by its heartbeat (every 2 s at --lease 8); before, it went on until
# its job ended, 2 minutes on.
wait_for 20 grep -q 'worker id taken by another live process: draining' "$E2E_DIR/busy.log" \
  || fail "the busy worker was not told its id was taken: $(tail -3 "$E2E_DIR/busy.log")"
# The line names the process that took the id (its holder was "").
grep 'worker id taken by another live process' "$E2E_DIR/busy.log" \
  | grep -q "holder=\"pid $TAKER on host $(hostname)\"" || fail "the holder is not named: $(grep 'worker id taken' "$E2E_DIR/busy.log")"
wait_for 20 gone "$PID_busy" || fail "the busy worker did not exit"
set +e; wait "$PID_busy"; rc=$?; set -e
((rc == 3)) || fail "the busy worker exited $rc, expected 3"
echo "# the busy worker exited $((SECONDS - continued)) s after it was continued" >&2
[[ $(sql "SELECT pid FROM bgexec.worker WHERE id = 'busy'") == "$TAKER" ]] \
  || fail "the worker row is not the taker's: $(sql "SELECT * FROM bgexec.worker WHERE id = 'busy'")"
kill -TERM "$TAKER"; wait "$TAKER" || fail "the taker exited $?"
ok "a worker with no free slot learnt from its heartbeat that its id was taken, and exited 3"

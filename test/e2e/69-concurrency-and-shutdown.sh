#!/usr/bin/env bash
# Where the mutation run of the daemon found no test: a worker never runs
# more jobs at once than --concurrency; and a job still running when the
# drain's grace runs out fails retryable (worker_shutdown), so with
# attempts left the database queues it again.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57935
# Counted by the steps themselves: each writes + as it starts and - as it
# ends (O_APPEND, one line each).  Not the jobs running in the database: a
# job whose step has ended and whose finish is queued gives up its slot
# but holds its lease a moment more (README, Worker settings), so the rows
# showed 3 for a moment in CI.
start_worker w1 --allow-run --concurrency 2 --lease 10
F=$E2E_DIR/steps
step='{"steps": [{"id": "s", "run": ["sh", "-c", "echo + >> '"$F"'; sleep 2; echo - >> '"$F"'"]}]}'
for i in 1 2 3 4 5 6; do "$BGEXEC" submit workflow "$step" >/dev/null || fail submit; done
ended() { [[ $(grep -c -- - "$F" 2>/dev/null) == 6 ]]; }
wait_for 60 ended || fail "6 steps did not end: $(tr '\n' ' ' <"$F")"
max=$(awk '/\+/ { n++; if (n > m) m = n } /-/ { n-- } END { print m + 0 }' "$F")
((max == 2)) || fail "w1 ran $max steps at once with --concurrency 2: $(tr '\n' ' ' <"$F")"
ok "at most 2 steps at once with --concurrency 2"
kill -TERM "$PID_w1"; wait "$PID_w1" || true
start_worker w2 --allow-run --grace 1 --lease 10 --queue late
id=$("$BGEXEC" submit workflow --queue late --max-attempts 2 '{"steps": [{"id": "s", "run": ["sleep", "30"]}]}') || fail submit
started() { [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_started'") == 1 ]]; }
wait_for 20 started || fail "step did not start"
kill -TERM "$PID_w2"; wait "$PID_w2" || true
[[ $(job_status "$id") == queued ]] \
  || fail "job is $(job_status "$id"), expected queued for its second attempt: $(sql "SELECT string_agg(kind, ' ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $id")"
ok "a job cut off by the drain's grace is queued again for its second attempt"

#!/usr/bin/env bash
# Where the mutation run of the daemon found no test: a worker never runs
# more jobs at once than --concurrency; and a job still running when the
# drain's grace runs out fails retryable (worker_shutdown), so with
# attempts left the database queues it again.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57935
start_worker w1 --allow-run --concurrency 2 --lease 10
for i in 1 2 3 4 5 6; do "$BGEXEC" submit workflow '{"steps": [{"id": "s", "run": ["sleep", "2"]}]}' >/dev/null || fail submit; done
max=0
for i in $(seq 1 40); do
  n=$(sql "SELECT count(*) FROM bgexec.job WHERE status = 'running' AND lease_owner = 'w1'")
  ((n > max)) && max=$n
  sleep 0.1
done
((max == 2)) || fail "w1 ran $max jobs at once with --concurrency 2"
ok "at most 2 jobs at once with --concurrency 2"
kill -TERM "$PID_w1"; wait "$PID_w1" || true
start_worker w2 --allow-run --grace 1 --lease 10 --queue late
id=$("$BGEXEC" submit workflow --queue late --max-attempts 2 '{"steps": [{"id": "s", "run": ["sleep", "30"]}]}') || fail submit
started() { [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_started'") == 1 ]]; }
wait_for 20 started || fail "step did not start"
kill -TERM "$PID_w2"; wait "$PID_w2" || true
[[ $(job_status "$id") == queued ]] \
  || fail "job is $(job_status "$id"), expected queued for its second attempt: $(sql "SELECT string_agg(kind, ' ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $id")"
ok "a job cut off by the drain's grace is queued again for its second attempt"

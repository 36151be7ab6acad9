#!/usr/bin/env bash
# A worker killed by SIGKILL while it waits for work leaves its session in
# await_claim: the jobs submitted after its death are not claimed for it
# (they ran nowhere and, at max_attempts 1, ended failed as worker_lost);
# its session hands the wake to a live worker and ends.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57969

waiting() { [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bgexec worker listen' AND wait_event = 'Extension'") -ge $1 ]]; }
started_by() { sql "SELECT count(*) FROM bgexec.job_event WHERE kind = 'started' AND data->>'worker' = '$1'"; }

# alone on its queue: the job stays queued until a live worker comes
start_worker dead1 --queue q1 --lease 3
wait_for 20 waiting 1 || fail "dead1 did not wait in await_claim"
kill -KILL "$PID_dead1"; wait "$PID_dead1" 2>/dev/null || true
id=$("$BGEXEC" submit noop --queue q1) || fail submit
sleep 4  # past the dead worker's lease: a claim for it would have ended failed by now
[[ $(started_by dead1) == 0 ]] || fail "a job submitted after dead1 died was claimed for it: $(job_status "$id")"
[[ $(job_status "$id") == queued ]] || fail "job $id is $(job_status "$id"), expected queued"
wait_for 10 bash -c "[[ \$(psql -qXAt -c \"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bgexec worker listen'\") == 0 ]]" \
  || fail "the dead worker's session is still there"
start_worker live1 --queue q1
wait_status "$id" completed 20

# beside a live waiting worker: every job goes to the live one, at once
start_worker dead2 --queue q2 --lease 3
start_worker live2 --queue q2
wait_for 20 waiting 2 || fail "the q2 workers did not wait in await_claim"
kill -KILL "$PID_dead2"; wait "$PID_dead2" 2>/dev/null || true
for i in 1 2 3 4 5; do
  id=$("$BGEXEC" submit noop --queue q2) || fail submit
  wait_status "$id" completed 10
done
[[ $(started_by dead2) == 0 ]] || fail "jobs were claimed for dead2 after it died"
ok "no job is claimed for a worker that died waiting"

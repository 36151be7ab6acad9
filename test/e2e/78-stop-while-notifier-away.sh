#!/usr/bin/env bash
# A stop requested while the worker's notifier session is away (the server
# ended it) reaches the job once the notifier is back: it heartbeats at
# once, and the heartbeat reads the stop.  The wake went with the dead
# session, and the stop waited for the next heartbeat, up to a third of
# the lease later (here 100 s; 6 to 8 s on the default lease).
source "$(dirname "$0")/lib.sh"
e2e_cluster 57901
start_worker w1 --allow-run --lease 300
wait_for 10 grep -q 'msg=listening via=await_claim' "$E2E_DIR/w1.log" || fail "not waiting"
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "a", "run": ["sleep", "600"]}]}') || fail submit
running() { [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_started'") == 1 ]]; }
wait_for 20 running || fail "job $id did not start: $(job_status "$id")"
sleep 1  # past the heartbeat the claim is followed by
# In one statement: the stop's wake finds the notifier's session ending.
sql "SELECT pg_terminate_backend(pid), bgexec.stop($id) FROM pg_stat_activity
      WHERE application_name = 'bgexec worker listen'" >/dev/null
wait_for 20 status_is "$id" cancelled || fail "job $id is $(job_status "$id") after the stop"
ms=$(sql "SELECT round(extract(epoch FROM finished_at - stop_requested_at) * 1000) FROM bgexec.job WHERE id = $id")
echo "# stop to cancelled: $ms ms" >&2
((ms < 10000)) || fail "the stop took $ms ms to reach the job (its next heartbeat, not the notifier's return)"
grep -q 'msg="notifier disconnected"' "$E2E_DIR/w1.log" || fail "the notifier's session was not ended: the test tested nothing"
ok "a stop made while the notifier was away reached the job in $ms ms"

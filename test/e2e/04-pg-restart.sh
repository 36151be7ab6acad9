#!/usr/bin/env bash
# A PostgreSQL restart mid-run: workers reconnect (LISTEN, claim, heartbeat),
# nothing is lost — every job ends completed — and new work is picked up.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57944
start_worker w1 --allow-run --concurrency 4
start_worker w2 --allow-run --concurrency 4

ids=()
for i in $(seq 1 12); do
  ids+=("$("$BGEXEC" submit workflow --max-attempts 5 \
    '{"steps": [{"id": "a", "sleep": 1}, {"id": "b", "needs": ["a"], "run": ["echo", "done"]}]}')")
done
wait_for 20 bash -c "[[ \$(psql -XAtc \"SELECT count(*) FROM bgexec.job WHERE status = 'running'\") -ge 4 ]]" \
  || fail "jobs did not start"
cluster_restart "$E2E_DIR/pg" || fail "restart"
echo "# restarted PostgreSQL" >&2
for id in "${ids[@]}"; do wait_status "$id" completed 90; done
kill -0 "$PID_w1" && kill -0 "$PID_w2" || fail "a worker exited"
grep -q "database call failed\|heartbeat failed\|notifier disconnected\|claim failed" "$E2E_DIR"/w*.log \
  || fail "workers never noticed the restart"

# after the restart, NOTIFY-driven claiming works again
late=$("$BGEXEC" submit noop)
wait_status "$late" completed 15
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE status <> 'completed'") == 0 ]] || fail "a job was not completed"

# a restart during a drain: the worker still marks its row stopped on the
# way out (its idle control connection was closed by the restart, and the
# deregister failed on it, so the next worker of the id waited out a lease).
# A 10 s lease and a 5 s step: the drain ends once the server is back, with
# the job completed (with a 2 s lease the worker gave the job up during the
# restart, and its deregister's retries could run out before the server
# was back); no reconcile on the control connection meanwhile, which would
# make it again before the deregister.
start_worker w3 --allow-run --queue dq --lease 10 --reconcile-interval 3600
wait_for 20 bash -c "[[ \$(psql -XAtc \"SELECT count(*) FROM bgexec.worker WHERE id = 'w3'\") == 1 ]]" || fail "w3 did not register"
dj=$("$BGEXEC" submit workflow --queue dq '{"steps": [{"id": "a", "run": ["sleep", "5"]}]}') || fail submit
wait_status "$dj" running 20
kill -TERM "$PID_w3"
cluster_restart "$E2E_DIR/pg" || fail "restart"
wait "$PID_w3" || true
[[ $(sql "SELECT stopped_at IS NOT NULL FROM bgexec.worker WHERE id = 'w3'") == t ]] \
  || fail "w3's row left unstopped: $(grep deregister "$E2E_DIR/w3.log")"
[[ $(job_status "$dj") == completed ]] || fail "the drained job is $(job_status "$dj")"
ok

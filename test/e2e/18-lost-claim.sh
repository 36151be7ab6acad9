#!/usr/bin/env bash
# A claim whose reply is lost after commit: the worker's connection goes
# through a proxy that, once, withholds the reply of a claim carrying a
# marked job until the claim has committed, and then cuts the connection.
# The job is running under the worker's id with a lease the worker never
# received.  The worker calls bgexec.unclaim before it claims again: the job
# goes back to the queue with its attempt given back, and runs, although it
# allows one attempt only (invariant 7: work not yet started is never lost).
# Without unclaim its lease would expire and reconcile would fail it as
# worker_lost.  Then the worker's row is deleted under it: its next heartbeat
# is answered 'register', and it registers again.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57958

start_cut_proxy 57959 LOST-CLAIM-MARKER reply

start_worker w1 --db "$PROXIED" --poll 0.2 --reconcile-interval 0.5
registered() { [[ $(sql "SELECT count(*) FROM bgexec.worker WHERE id = 'w1' AND stopped_at IS NULL") == 1 ]]; }
wait_for 10 registered || fail "worker did not register"
j=$(sql "SELECT bgexec.submit('noop', '{\"marker\": \"LOST-CLAIM-MARKER\"}')")
terminal() { [[ $(job_status "$j") =~ ^(completed|failed|cancelled|timed_out)$ ]]; }
wait_for 60 terminal || fail "job $j is still $(job_status "$j")"
[[ -f $E2E_DIR/cut ]] || fail "the proxy never cut a claim's reply (marker not seen)"
[[ $(job_status "$j") == completed ]] \
  || fail "job $j ended $(job_status "$j"): $(sql "SELECT error FROM bgexec.job WHERE id = $j")"
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $j") == 1 ]] || fail "the lost claim's attempt was counted"
kinds=$(sql "SELECT string_agg(kind, ' ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $j")
[[ $kinds == "started retry_scheduled started completed" ]] || fail "events: $kinds"
[[ $(sql "SELECT data->'error'->>'reason' FROM bgexec.job_event
           WHERE job_id = $j AND kind = 'retry_scheduled'") == claim_reply_lost ]] \
  || fail "retry_scheduled does not name claim_reply_lost"
grep -q 'returned to the queue' "$E2E_DIR/w1.log" || fail "the worker did not log the unclaim"
ok "a job whose claim reply was lost runs once, its attempt not counted"

sql "DELETE FROM bgexec.worker WHERE id = 'w1'" >/dev/null
wait_for 15 registered || fail "the worker did not register again after its row was deleted"
grep -q 'worker row missing, registering again' "$E2E_DIR/w1.log" || fail "no log of the re-registration"
[[ $(sql "SELECT alive FROM bgexec.worker_stats WHERE id = 'w1'") == t ]] || fail "worker_stats does not show it alive"
ok "a worker whose row was deleted registers again"

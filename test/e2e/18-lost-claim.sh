#!/usr/bin/env bash
# A claim whose reply is lost after commit: the worker's connection goes
# through a proxy that, once, withholds the reply of a claim carrying a
# marked job until the claim has committed, and then cuts the connection.
# The job is running under the worker's id with a lease the worker never
# received.  The worker calls bgexec.unclaim before it claims again: the job
# goes back to the queue with its attempt given back, and runs, although it
# allows one attempt only (invariant 7: work not yet started is never lost).
# Without unclaim its lease would expire and reconcile would fail it as
# worker_lost.  A worker claims on two connections: the job submitted to an
# idle worker is claimed by its wait (await_claim, the listen connection);
# a second worker loses a claim of the control connection's.  Then the row
# of the first is deleted under it: its next heartbeat is answered
# 'register', and it registers again.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57958

start_cut_proxy LOST-CLAIM-MARKER reply

start_worker w1 --db "$PROXIED" --poll 0.2 --reconcile-interval 0.5
registered() { [[ $(sql "SELECT count(*) FROM bgexec.worker WHERE id = 'w1' AND stopped_at IS NULL") == 1 ]]; }
wait_for 10 registered || fail "worker did not register"
j=$(sql "SELECT bgexec.submit('noop', '{\"marker\": \"LOST-CLAIM-MARKER\"}')")
wait_for 60 job_ended "$j" || fail "job $j is still $(job_status "$j")"
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
grep -q 'notifier disconnected' "$E2E_DIR/w1.log" || fail "the lost reply was not await_claim's"

# A claim of the control connection's: one slot, two jobs in one commit.  The
# wait claims the first (higher priority); the marked one is claimed by
# the fetcher when the slot frees (the wait's claim came back full), and
# that reply is lost.
rm -f "$E2E_DIR/cut"
start_cut_proxy LOST-FETCH-MARKER reply
start_worker w2 --db "$PROXIED" --queue fetch --concurrency 1 --poll 0.2 --reconcile-interval 0.5
wait_for 10 grep -q 'msg=listening' "$E2E_DIR/w2.log" || fail "w2 did not listen"
f=$(sql "SELECT max(id) FROM bgexec.submit_many('[{\"kind\": \"noop\", \"queue\": \"fetch\", \"priority\": 1},
           {\"kind\": \"noop\", \"queue\": \"fetch\", \"payload\": {\"marker\": \"LOST-FETCH-MARKER\"}}]') AS t(id)")
wait_for 60 job_ended "$f" || fail "job $f is still $(job_status "$f")"
[[ -f $E2E_DIR/cut ]] || fail "the proxy never cut the fetcher's claim reply (marker not seen)"
grep -q 'msg="claim failed" error="control:' "$E2E_DIR/w2.log" || fail "the lost reply was not the control connection's"
[[ $(job_status "$f") == completed && $(sql "SELECT attempt FROM bgexec.job WHERE id = $f") == 1 ]] \
  || fail "job $f ended $(job_status "$f"), attempt $(sql "SELECT attempt FROM bgexec.job WHERE id = $f")"
kinds=$(sql "SELECT string_agg(kind, ' ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $f")
[[ $kinds == "started retry_scheduled started completed" ]] || fail "events: $kinds"
ok "the same for a claim of the control connection"

sql "DELETE FROM bgexec.worker WHERE id = 'w1'" >/dev/null
wait_for 15 registered || fail "the worker did not register again after its row was deleted"
grep -q 'worker row missing, registering again' "$E2E_DIR/w1.log" || fail "no log of the re-registration"
[[ $(sql "SELECT alive FROM bgexec.worker_stats WHERE id = 'w1'") == t ]] || fail "worker_stats does not show it alive"
ok "a worker whose row was deleted registers again"

#!/usr/bin/env bash
# unclaim keeps the jobs whose run here ended without a finish.  The second
# half of unclaim's held list (33-unclaim-held is the first): a job claimed
# after a lost claim, started here, then abandoned without a finish written
# (its lease could not be renewed) is still running in the database under
# its lease until that expires.  Its lease is newer than the lost claim's,
# so unclaim must be told it is no job the worker never received: given back
# with its attempt uncounted, a job that started would run a second time
# (invariant 7); kept, it ends worker_lost once its lease expires.
# The wait claims the marked job M and a proxy cuts that reply; a session of
# the test holds the worker's claim lock, so each unclaim returns NULL (a
# claim of the worker may still be running) and is tried again; meanwhile
# L (a 60 s sleep) is claimed and started, and the session locks L's row, so
# heartbeats answer 'busy' and the worker abandons L a lease margin (4 s
# here) before its lease expires.  Then the session ends: unclaim runs while
# L is still running in the database.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57972

start_cut_proxy LOST-UNFINISHED-MARKER reply
start_worker w1 --db "$PROXIED" --queue unf --concurrency 2 --lease 12 --kill-grace 3 \
  --poll 0.2 --reconcile-interval 0.5
wait_for 10 grep -q 'msg=listening' "$E2E_DIR/w1.log" || fail "w1 did not listen"

hold_claim_lock w1

m=$(sql "SELECT bgexec.submit('noop', '{\"marker\": \"LOST-UNFINISHED-MARKER\"}', 'unf')")
wait_for 10 [ -f "$E2E_DIR/cut" ] || fail "the proxy never cut M's claim reply"
# L's wake must find the notifier's new session waiting (33-unclaim-held).
relistened() { [[ $(grep -c 'msg=listening' "$E2E_DIR/w1.log") -ge 2 ]]; }
wait_for 10 relistened || fail "the notifier did not listen again"
l=$("$BGEXEC" submit workflow --queue unf '{"steps": [{"id": "l", "sleep": 60}]}') || fail submit
step_started() { [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $l AND kind = 'step_started'") == 1 ]]; }
wait_for 15 step_started || fail "L did not start: $(job_status "$l")"
hold "SELECT 'row-lock', id FROM bgexec.job WHERE id = $l FOR UPDATE;"
wait_for 10 held row-lock || fail "the test's session did not lock L: $(cat "$E2E_DIR/hold.out")"
abandoned() { grep -q "msg=\"abandoning job\" job_id=$l reason=\"lease could not be renewed" "$E2E_DIR/w1.log"; }
wait_for 20 abandoned || fail "the worker did not abandon L"
# Its step is over and no finish was written: L is running in the database
# under its lease, and unclaim has not yet been able to run.
[[ $(job_status "$l") == running ]] || fail "L is $(job_status "$l") when abandoned"
grep -q 'returned to the queue' "$E2E_DIR/w1.log" && fail "unclaim ran while the claim lock was held"
hold "COMMIT;"
exec 7>&-

wait_for 60 job_ended "$m" || fail "M is still $(job_status "$m")"
# Kept, L ends worker_lost when its lease expires; given back, it is
# claimed again (its retry_scheduled says so without waiting out its sleep).
l_settled() {
  job_ended "$l" || [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $l AND kind = 'retry_scheduled'") != 0 ]]
}
wait_for 60 l_settled || fail "L is still $(job_status "$l")"
ev() { sql "SELECT string_agg(kind, ' ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $1"; }
[[ $(ev "$m") == "started retry_scheduled started completed" ]] || fail "M's events: $(ev "$m")"
[[ $(ev "$l") == "started step_started worker_lost failed" ]] \
  || fail "L was given back after its run here had started: $(ev "$l")"
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $l") == 1 ]] || fail "L was claimed again"
grep -q 'returned to the queue.*jobs=1' "$E2E_DIR/w1.log" || fail "the worker did not unclaim M alone"
# The case this test is for: L was still running in the database (its
# lease not yet expired) when M was given back.
[[ $(sql "SELECT r.created_at < w.created_at
            FROM bgexec.job_event r, bgexec.job_event w
           WHERE r.job_id = $m AND r.kind = 'retry_scheduled'
             AND w.job_id = $l AND w.kind = 'worker_lost'") == t ]] \
  || fail "L's lease had expired before M was given back: the case was not set up"
ok "unclaim kept the job whose run here ended without a finish"

#!/usr/bin/env bash
# unclaim keeps the jobs the worker runs.  A claim's reply is lost; until
# bgexec.unclaim gives its job back, the worker still claims (on its other
# connection) and starts the jobs that arrive meanwhile.  Their leases are
# newer than the lost claim's, so only the list of leases the worker holds
# tells them apart from the lost claim's jobs: unclaim must give back the
# one and keep the others.  A job given back while it runs here would be
# claimed again and run a second time.
# The wait claims the marked job M and a proxy cuts that reply; a session of
# the test holds the worker's claim lock until L's step has started, so each
# unclaim returns NULL (a claim of the worker may still be running) and is
# tried again; meanwhile L (10 s) is submitted, and the worker claims and
# starts it.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57970

start_cut_proxy LOST-HELD-MARKER reply
start_worker w1 --db "$PROXIED" --queue held --concurrency 2 --lease 10 --poll 0.2 --reconcile-interval 0.5
wait_for 10 grep -q 'msg=listening' "$E2E_DIR/w1.log" || fail "w1 did not listen"

hold_claim_lock w1
m=$(sql "SELECT bgexec.submit('noop', '{\"marker\": \"LOST-HELD-MARKER\"}', 'held')")
wait_for 10 [ -f "$E2E_DIR/cut" ] || fail "the proxy never cut M's claim reply"
# L's wake must find the notifier's new session waiting (it passes L to the
# fetcher); a wake sent before it is back would leave L for after unclaim.
relistened() { [[ $(grep -c 'msg=listening' "$E2E_DIR/w1.log") -ge 2 ]]; }
wait_for 10 relistened || fail "the notifier did not listen again"
l=$("$BGEXEC" submit workflow --queue held '{"steps": [{"id": "l", "sleep": 10}]}') || fail submit
step_started() { [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $l AND kind = 'step_started'") == 1 ]]; }
wait_for 20 step_started || fail "L did not start: $(job_status "$l")"
grep -q 'returned to the queue' "$E2E_DIR/w1.log" && fail "unclaim ran while the claim lock was held"
hold "COMMIT;"
exec 7>&-
wait -- "$HOLD_PID" || fail "the test's session: $(cat "$E2E_DIR/hold.out")"

wait_for 60 job_ended "$m" || fail "M is still $(job_status "$m")"
wait_for 60 job_ended "$l" || fail "L is still $(job_status "$l")"
grep -q 'returned to the queue' "$E2E_DIR/w1.log" || fail "the worker did not unclaim"
ev() { sql "SELECT string_agg(kind, ' ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $1"; }
[[ $(ev "$m") == "started retry_scheduled started completed" ]] || fail "M's events: $(ev "$m")"
[[ $(ev "$l") == "started step_started step_completed completed" ]] || fail "L was given back while it ran: $(ev "$l")"
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $l") == 1 ]] || fail "L was claimed again"
grep -q 'claimed again' "$E2E_DIR/w1.log" && fail "a job was claimed again while it ran here"
# The case this test is for: L was running here when M was given back.
[[ $(sql "SELECT s.created_at < r.created_at AND r.created_at < c.created_at
            FROM bgexec.job_event s, bgexec.job_event r, bgexec.job_event c
           WHERE s.job_id = $l AND s.kind = 'started' AND c.job_id = $l AND c.kind = 'completed'
             AND r.job_id = $m AND r.kind = 'retry_scheduled'") == t ]] \
  || fail "L was not running when M was given back: the case was not set up"
ok "unclaim gave back the lost claim's job and kept the one started since"

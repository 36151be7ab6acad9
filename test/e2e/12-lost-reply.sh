#!/usr/bin/env bash
# A reply lost after commit: the worker's connection goes through a proxy that,
# once, forwards an append_events call carrying a marker log line, lets the
# server commit it, and then cuts the connection instead of passing the reply
# on.  The worker retries the call on a new connection; after_seq makes the
# retry write nothing, so the marker line is stored exactly once and the job's
# events stay gapless.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57953

start_cut_proxy LOST-REPLY-MARKER request

start_worker w1 --db "$PROXIED" --allow-run --poll 0.2
j=$("$BGEXEC" submit workflow '{"steps": [
  {"id": "a", "run": ["sh", "-c", "echo before; echo LOST-REPLY-MARKER; echo after"]},
  {"id": "b", "needs": ["a"], "run": ["echo", "next step"]}]}')
wait_status "$j" completed 60
[[ -f $E2E_DIR/cut ]] || fail "the proxy never cut a reply (marker not seen)"
grep -q 'database call failed, retrying' "$E2E_DIR/w1.log" || fail "the worker did not retry the cut call"
n=$(sql "SELECT count(*) FROM bgexec.job_event, jsonb_array_elements_text(data->'lines') l
          WHERE job_id = $j AND kind = 'log' AND l = 'LOST-REPLY-MARKER'")
[[ $n == 1 ]] || fail "the marker line is stored $n times"
[[ $(sql "SELECT bool_and(seq = rn) FROM (SELECT seq, row_number() OVER (ORDER BY seq) AS rn
                                           FROM bgexec.job_event WHERE job_id = $j) s") == t ]] \
  || fail "events not gapless"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $j AND kind = 'step_completed'") == 2 ]] \
  || fail "step events duplicated or missing"
ok "a batch retried after its reply was lost is stored once"

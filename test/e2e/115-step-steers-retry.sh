#!/usr/bin/env bash
# A step says how its failure is retried: a stderr line "::error {json}"
# (the last one wins) is merged into the step's error should it fail.
# "retryable": false ends a job with attempts left (bad input: it will
# never work), "retry_after": N queues its next attempt N seconds on (a
# remote rate limit) instead of the queue's backoff.  The old worker had no
# such line: every non-zero exit was retried after the backoff (here at
# most a second), the line a log line.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58115
mkdir -p "$E2E_DIR/bin"
act=$E2E_DIR/bin/bgexec-e2e-refuse
printf '#!/bin/sh\necho "::error {\\"retryable\\": false, \\"code\\": \\"E_ACTION\\"}" >&2\nexit 3\n' >"$act"
chmod 755 "$act"; chmod a+rx "$E2E_DIR" "$E2E_DIR/bin"
sql "SELECT bgexec.configure_queue('q', retry_base => '100 ms', retry_cap => '1 s')" >/dev/null
start_worker w --queue q --allow-run --action refuse="$act"
wait_for 20 grep -q 'msg=listening' "$E2E_DIR/w.log" || fail "the worker did not start"
run_job() {  # run_job SCRIPT [STEP-KIND]: a one-step job of 5 attempts running sh -c SCRIPT
  local s
  s=$(jq -cn --arg s "$1" '{steps: [{id: "s", run: ["sh", "-c", $s]}]}')
  sql "SELECT bgexec.submit('workflow', '$s', queue => 'q', max_attempts => 5)"
}
err() { sql "SELECT error->>'$2' FROM bgexec.job WHERE id = $1"; }
requeued() { [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $1 AND kind = 'retry_scheduled'") != 0 ]]; }
retried() { (($(sql "SELECT attempt FROM bgexec.job WHERE id = $1") >= 2)); }

# 1. retryable false (and keys the worker keeps its own): failed at once
bad=$(run_job 'echo "::error {\"retryable\": false, \"message\": \"bad input\", \"code\": \"E_INPUT\", \"step\": \"x\", \"reason\": \"y\"}" >&2; exit 1')
wait_for 60 job_ended "$bad" || fail "the job did not end: $(sql "SELECT status, attempt, error FROM bgexec.job WHERE id = $bad")"
[[ $(sql "SELECT status || ' ' || attempt FROM bgexec.job WHERE id = $bad") == 'failed 1' ]] \
  || fail "retryable false: $(sql "SELECT status, attempt, error FROM bgexec.job WHERE id = $bad")"
[[ $(err "$bad" retryable)/$(err "$bad" message)/$(err "$bad" code)/$(err "$bad" step)/$(err "$bad" reason)/$(err "$bad" detail) \
   == 'false/bad input/E_INPUT/s//sh: exit status 1' ]] \
  || fail "the error: $(sql "SELECT error FROM bgexec.job WHERE id = $bad")"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $bad AND kind = 'retry_scheduled'") == 0 ]] \
  || fail "retried: $(sql "SELECT seq, kind, data FROM bgexec.job_event WHERE job_id = $bad ORDER BY seq")"
sql "SELECT data->'error' FROM bgexec.job_event WHERE job_id = $bad AND kind = 'step_failed'" | grep -q E_INPUT \
  || fail "step_failed has not the step's keys"

# 2. retry_after 120, the last line winning over a retryable false before it
later=$(run_job 'echo "::error {\"retryable\": false}" >&2; echo "::error {\"retry_after\": 120, \"message\": \"rate limited\"}" >&2; exit 1')
wait_for 60 requeued "$later" \
  || fail "not requeued: $(sql "SELECT status, attempt, error FROM bgexec.job WHERE id = $later")"
sleep 3  # the old worker ran attempt 2 by now (a backoff of a second at most)
[[ $(sql "SELECT status || ' ' || attempt || ' ' || (run_after - e.created_at BETWEEN interval '119 s' AND interval '121 s')
            || ' ' || (error->>'message') FROM bgexec.job j
            JOIN bgexec.job_event e ON e.job_id = j.id AND e.kind = 'retry_scheduled' WHERE j.id = $later") \
   == 'queued 1 true rate limited' ]] \
  || fail "retry_after 120: $(sql "SELECT status, attempt, run_after - now(), error FROM bgexec.job WHERE id = $later")"

# 3. an action step says it too
a=$(sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"a\", \"action\": \"refuse\"}]}', queue => 'q', max_attempts => 5)")
wait_for 60 job_ended "$a" || fail "the action's job did not end: $(sql "SELECT status, attempt FROM bgexec.job WHERE id = $a")"
[[ $(sql "SELECT status || ' ' || attempt || ' ' || (error->>'code') || ' ' || (error->>'retryable') FROM bgexec.job WHERE id = $a") \
   == 'failed 1 E_ACTION false' ]] || fail "the action: $(sql "SELECT status, attempt, error FROM bgexec.job WHERE id = $a")"

# 4. a step that completes ignores it; a line that is not a JSON object is a log line
fine=$(run_job 'echo "::error {\"retryable\": false}" >&2; echo "::error not json" >&2; echo "::error [1]" >&2; echo 7')
wait_status "$fine" completed 60
[[ $(sql "SELECT string_agg(l, '|' ORDER BY seq) FROM bgexec.job_event, jsonb_array_elements_text(data->'lines') l
            WHERE job_id = $fine AND kind = 'log' AND data->>'stream' = 'stderr'") == '::error not json|::error [1]' ]] \
  || fail "the log lines: $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $fine AND kind = 'log'")"

# 5. without the line, the queue's backoff as before
plain=$(run_job 'exit 1')
wait_for 60 retried "$plain" \
  || fail "a plain failure was not retried after the backoff: $(sql "SELECT status, attempt, run_after - now() FROM bgexec.job WHERE id = $plain")"
ok "retryable false failed at attempt 1 (run and action), retry_after 120 queued 120 s on, a completed step ignored it"

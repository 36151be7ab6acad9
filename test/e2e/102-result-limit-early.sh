#!/usr/bin/env bash
# A job's result past the worker's --max-result-bytes fails the job as soon
# as its sink steps' outputs add up past the limit, not once every step has
# run and the result been built: its other steps are ended and the outputs
# held dropped.  Refused at the finish only, the worker held every sink's
# output and then the result's text (8 steps of 5 MB: 80 MB more of RSS),
# and 20 steps of 15 MB were 600 MB.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58028

start_worker w1 --lease 30 --allow-run --max-result-bytes 12000000
pid=$WORKER_PID
# 8 sink steps of 5 MB each, step i done after i s: past 12 MB at the third.
steps=""
for ((i = 0; i < 8; i++)); do
  steps+="${steps:+,}{\"id\": \"s$i\", \"run\": [\"sh\", \"-c\", \"sleep $i; yes x | tr -d '\\\\n' | head -c 5000000\"]}"
done
job=$("$BGEXEC" submit workflow "{\"steps\": [$steps]}" --max-attempts 3) || fail "submit"
wait_status "$job" failed 60
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
row=$(sql "SELECT attempt, error->>'sqlstate', error->>'result_bytes', error->>'max_result_bytes', error->>'retryable',
                  error->>'message' LIKE 'the job''s result is at least 15000006 bytes as JSON, over the worker''s --max-result-bytes of 12000000 %'
           FROM bgexec.job WHERE id = $job")
[[ $row == "1|54000|15000006|12000000|false|t" ]] || fail "error: $row; $(sql "SELECT error FROM bgexec.job WHERE id = $job")"
# The three outputs that passed it are in their events; the other steps ended.
done_steps=$(sql "SELECT string_agg(data->>'step', ',' ORDER BY data->>'step') FROM bgexec.job_event
                  WHERE job_id = $job AND kind = 'step_completed'")
[[ $done_steps == "s0,s1,s2" ]] || fail "steps completed: $done_steps"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $job AND kind = 'step_failed'
            AND data->'error'->>'reason' = 'sibling_failed'") == 5 ]] || fail "the other steps did not end"
grep -q 'msg="job result over the limit" job_id='"$job"' bytes=15000006 limit=12000000 step=s2' "$E2E_DIR/w1.log" \
  || fail "no log line"
# The worker's peak RSS: three outputs of 5 MB (and their events' text)
# over its own, ~65 MB, not eight and the result's 40 MB of text (~140-150
# MB before).
((hwm < 100 * 1024)) || fail "the worker peaked at $hwm KiB"

# Under it (2 x 5 MB): completed, its result whole.
two=$("$BGEXEC" submit workflow '{"steps": [{"id": "a", "run": ["sh", "-c", "yes x | tr -d \"\\\\n\" | head -c 5000000"]},
                                             {"id": "b", "run": ["sh", "-c", "yes y | tr -d \"\\\\n\" | head -c 5000000"]}]}') \
  || fail "submit under"
wait_status "$two" completed 60
[[ $(sql "SELECT length(result->>'a') + length(result->>'b') FROM bgexec.job WHERE id = $two") == 10000000 ]] \
  || fail "result under the limit"
ok "failed at the third 5 MB sink of eight; worker peak $hwm KiB"

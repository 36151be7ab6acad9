#!/usr/bin/env bash
# A step's "if": the step runs when its template renders to true, and is
# skipped when false (step_completed {"skipped": true}, output null), the
# steps that need it running as usual; "!" before the template negates it.
# An approval whose "if" is false does not suspend the job.  A value that
# is not a boolean fails the step, not retried.  A re-run (here, after an
# approval) does not evaluate a skipped step again.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57987
M=$E2E_DIR/marks; mkdir -p "$M"; chmod 777 "$M"
start_worker w1 --allow-run

id=$("$BGEXEC" submit workflow "{\"input\": {\"limit\": 100}, \"steps\": [
  {\"id\": \"check\", \"run\": [\"echo\", \"{\\\"small\\\": false, \\\"n\\\": 250}\"]},
  {\"id\": \"small\", \"needs\": [\"check\"], \"if\": \"{{steps.check.output.small}}\",
   \"run\": [\"sh\", \"-c\", \"echo ran >> $M/small; echo small\"]},
  {\"id\": \"large\", \"needs\": [\"check\"], \"if\": \"!{{steps.check.output.small}}\", \"run\": [\"echo\", \"large\"]},
  {\"id\": \"quiet\", \"needs\": [\"check\"], \"if\": false, \"approval\": {\"prompt\": \"never asked\"}},
  {\"id\": \"ask\", \"needs\": [\"small\", \"large\", \"quiet\"], \"if\": \"!{{steps.check.output.small}}\",
   \"approval\": {\"prompt\": \"load {{steps.check.output.n}} rows?\"}},
  {\"id\": \"join\", \"needs\": [\"ask\"], \"run\": [\"echo\", \"{{steps.small.output}}|{{steps.large.output}}|{{steps.quiet.output}}\"]}]}") \
  || fail submit
wait_status "$id" suspended 30
[[ $(sql "SELECT data->>'step' || ': ' || (data->>'prompt') FROM bgexec.job_event WHERE job_id = $id AND kind = 'suspended'") \
   == "ask: load 250 rows?" ]] || fail "suspended: $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $id AND kind = 'suspended'")"
skipped() { sql "SELECT string_agg(data->>'step', ' ' ORDER BY data->>'step') FROM bgexec.job_event
                 WHERE job_id = $id AND kind = 'step_completed' AND data->'skipped' = 'true' AND data->'output' = 'null'"; }
[[ $(skipped) == "quiet small" ]] || fail "skipped steps: $(skipped)"
[[ ! -e $M/small ]] || fail "the skipped step ran"
"$BGEXEC" resume "$id" '{"ok": true}' >/dev/null || fail resume
wait_status "$id" completed 30
[[ $(sql "SELECT result->>'join' FROM bgexec.job WHERE id = $id") == "null|large|null" ]] \
  || fail "result: $(sql "SELECT result FROM bgexec.job WHERE id = $id")"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_started' AND data->>'step' = 'small'") == 1 ]] \
  || fail "the skipped step was evaluated again after the resume"
"$BGEXEC" tail "$id" >"$E2E_DIR/tail.out" || fail "tail"
grep -q "skipped small (its if was false)" "$E2E_DIR/tail.out" || fail "tail: $(cat "$E2E_DIR/tail.out")"

# Not a boolean: the step fails, saying what the value was; not retried.
bad=$("$BGEXEC" submit workflow --max-attempts 3 '{"input": {"go": "yes"}, "steps": [
  {"id": "a", "if": "{{input.go}}", "run": ["echo", "a"]}]}') || fail submit
wait_status "$bad" failed 30
[[ $(sql "SELECT (error->>'message') || ' ' || (error->>'retryable') FROM bgexec.job WHERE id = $bad") \
   == 'step a: "if" {{input.go}} is "yes", not true or false false' ]] \
  || fail "not a boolean: $(sql "SELECT error FROM bgexec.job WHERE id = $bad")"
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $bad") == 1 ]] || fail "retried"
# An approval whose "if" cannot be rendered fails the job, not suspends it.
badq=$("$BGEXEC" submit workflow '{"steps": [{"id": "q", "if": "{{input.nothing}}", "approval": true}]}') || fail submit
wait_status "$badq" failed 30
[[ $(sql "SELECT error->>'step' FROM bgexec.job WHERE id = $badq") == q ]] || fail "approval if: $(sql "SELECT error FROM bgexec.job WHERE id = $badq")"
ok

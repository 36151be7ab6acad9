#!/usr/bin/env bash
# An approval step suspends the job; resume's input becomes the step's output
# and the job finishes without re-running the steps before the approval.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57946
M=$E2E_DIR/marks; mkdir -p "$M"; chmod 777 "$M"
start_worker w1 --allow-run

id=$("$BGEXEC" submit workflow "{\"input\": {\"n\": 7}, \"steps\": [
  {\"id\": \"count\", \"run\": [\"sh\", \"-c\", \"echo run >> $M/count; echo {{input.n}}\"]},
  {\"id\": \"gate\", \"needs\": [\"count\"], \"approval\": {\"prompt\": \"load {{steps.count.stdout}} rows?\"}},
  {\"id\": \"load\", \"needs\": [\"gate\"], \"run\": [\"echo\", \"{{steps.gate.output.who}} approved {{steps.count.output}}\"]}]}")
set +e; timeout 30 "$BGEXEC" tail "$id" >"$E2E_DIR/tail1.out"; rc=$?; set -e
((rc == 5)) || fail "tail exit code $rc, expected 5 (suspended)"
wait_status "$id" suspended 5
[[ $(sql "SELECT data->>'prompt' FROM bgexec.job_event WHERE job_id = $id AND kind = 'suspended'") == "load 7 rows?" ]] || fail "prompt"
"$BGEXEC" resume "$id" '{"who": "ann"}' >/dev/null || fail "resume"
set +e; timeout 30 "$BGEXEC" tail "$id" --from "$(sql "SELECT max(seq) FROM bgexec.job_event WHERE job_id = $id AND kind = 'resumed'")" >"$E2E_DIR/tail2.out"; rc=$?; set -e
((rc == 0)) || fail "tail exit code $rc after resume"
wait_status "$id" completed 5
[[ $(sql "SELECT result->>'load' FROM bgexec.job WHERE id = $id") == "ann approved 7" ]] || fail "result $(sql "SELECT result FROM bgexec.job WHERE id = $id")"
[[ $(wc -l <"$M/count") == 1 ]] || fail "count step re-ran after resume"
# resume of a job that is not suspended is refused
set +e; "$BGEXEC" resume "$id" >/dev/null; rc=$?; set -e
((rc == 1)) || fail "resume of a completed job: exit $rc"
# --json: resume's and retry's result is a boolean ("false" was a string,
# true in JavaScript), stop's the status it found
set +e; out=$("$BGEXEC" resume "$id" --json); set -e
[[ $out == "{\"id\":$id,\"ok\":false,\"result\":false}" ]] || fail "resume --json: $out"
set +e; out=$("$BGEXEC" retry "$id" --json); set -e
[[ $out == "{\"id\":$id,\"ok\":false,\"result\":false}" ]] || fail "retry --json: $out"
ok

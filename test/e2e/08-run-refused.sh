#!/usr/bin/env bash
# `run` steps are refused unless the worker has --allow-run: the job fails
# with a clear, non-retryable error; the worker keeps going.  Unknown actions
# and invalid payloads fail the job, never the process.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57948
start_worker w1

id=$("$BGEXEC" submit workflow --max-attempts 3 '{"steps": [{"id": "r", "run": ["echo", "hi"]}]}')
wait_status "$id" failed 20
msg=$(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $id")
[[ $msg == *--allow-run* ]] || fail "error message: $msg"
[[ $(sql "SELECT error->>'retryable' FROM bgexec.job WHERE id = $id") == false ]] || fail "retryable"
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $id") == 1 ]] || fail "a refused run was retried"

u=$("$BGEXEC" submit no-such-action '{"x": 1}')
wait_status "$u" failed 20
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $u") == *no-such-action* ]] || fail "unknown action error"

n=$("$BGEXEC" submit noop)
wait_status "$n" completed 20
set +e; "$BGEXEC" submit noop --wait >/dev/null; rc=$?; set -e
((rc == 0)) || fail "submit --wait exit $rc"
set +e; "$BGEXEC" submit workflow '{"steps": [{"id": "r", "run": ["true"]}]}' --wait >/dev/null; rc=$?; set -e
((rc == 1)) || fail "submit --wait of a failing job: exit $rc"
kill -0 "$PID_w1" || fail "worker died"
ok

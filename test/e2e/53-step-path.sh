#!/usr/bin/env bash
# A run step's argv[0] without a '/' is looked up on the step's PATH (its
# env's over the worker's), as its shell would look it up: it was looked up
# on the worker's, so "env": {"PATH": "/x/bin:/usr/bin"} with "run":
# ["mytool"] failed while ["sh", "-c", "mytool"] found it.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57991
mkdir -p "$E2E_DIR/bin" "$E2E_DIR/noexec"
printf '#!/bin/sh\necho "found $*"\n' >"$E2E_DIR/bin/mytool"
chmod 755 "$E2E_DIR/bin/mytool"
# the same name, not executable, earlier on the PATH: passed over, as execvp does
printf '#!/bin/sh\necho wrong\n' >"$E2E_DIR/noexec/mytool"
chmod 644 "$E2E_DIR/noexec/mytool"
chmod 755 "$E2E_DIR" "$E2E_DIR/bin" "$E2E_DIR/noexec"

start_worker w1 --allow-run --lease 10
step_path="$E2E_DIR/noexec:$E2E_DIR/bin:/usr/bin:/bin"
id=$("$BGEXEC" submit workflow "$(jq -cn --arg p "$step_path" '{steps: [
  {id: "direct", run: ["mytool", "a"], env: {PATH: $p}},
  {id: "shell", run: ["sh", "-c", "mytool b"], env: {PATH: $p}}]}')") || fail submit
wait_for 20 job_ended "$id" || fail "job $id is $(job_status "$id")"
[[ $(sql "SELECT result->>'direct' FROM bgexec.job WHERE id = $id") == "found a" ]] \
  || fail "run [\"mytool\"] on the step's PATH: $(sql "SELECT coalesce(error, result) FROM bgexec.job WHERE id = $id")"
[[ $(job_status "$id") == completed ]] || fail "job $id is $(job_status "$id")"
[[ $(sql "SELECT result->>'shell' FROM bgexec.job WHERE id = $id") == "found b" ]] || fail "sh -c mytool"

# The worker's PATH is not searched when the step has its own: sleep is in
# /usr/bin and /bin, which this one does not name.
bad=$("$BGEXEC" submit workflow "$(jq -cn --arg p "$E2E_DIR/bin" '{steps: [{id: "s", run: ["sleep", "0"], env: {PATH: $p}}]}')") \
  || fail submit
wait_status "$bad" failed 20
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $bad") == "cannot start sleep: No such file or directory" ]] \
  || fail "a program on the worker's PATH only: $(sql "SELECT error FROM bgexec.job WHERE id = $bad")"
# Only one not executable: EACCES, as execvp reports it.
denied=$("$BGEXEC" submit workflow "$(jq -cn --arg p "$E2E_DIR/noexec" '{steps: [{id: "s", run: ["mytool"], env: {PATH: $p}}]}')") \
  || fail submit
wait_status "$denied" failed 20
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $denied") == "cannot start mytool: Permission denied" ]] \
  || fail "a program found but not executable: $(sql "SELECT error FROM bgexec.job WHERE id = $denied")"

# Without a PATH of its own a step uses the worker's, as before.
plain=$("$BGEXEC" submit workflow '{"steps": [{"id": "s", "run": ["echo", "plain"]}]}') || fail submit
wait_status "$plain" completed 20
[[ $(sql "SELECT result->>'s' FROM bgexec.job WHERE id = $plain") == plain ]] || fail "a step on the worker's PATH"
kill -TERM "$PID_w1"; wait "$PID_w1" || fail "worker exit status $?"
ok

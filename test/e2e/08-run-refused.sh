#!/usr/bin/env bash
# `run` steps are refused unless the worker has --allow-run: the job fails
# with a clear, non-retryable error; the worker keeps going.  Unknown actions
# and invalid payloads fail the job, never the process.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57948
# an action that is a bash script, as many are
cat >"$E2E_DIR/bash-act.sh" <<'SH'
#!/bin/bash
input=$(cat)
printf '{"color": "%s", "pw": "%s", "db": "%s"}\n' "${COLOR:-none}" "${PGPASSWORD:-none}" "${BGEXEC_DB:-none}"
SH
chmod +x "$E2E_DIR/bash-act.sh"
# The worker's own credentials (trust authentication here ignores them)
# are not its steps'.
PGPASSWORD=worker-pw BGEXEC_DB="$(sql "SELECT 'host=' || current_setting('unix_socket_directories') || ' port=' || current_setting('port') || ' dbname=postgres password=worker-pw'")" \
  start_worker w1 --action "bash-act=$E2E_DIR/bash-act.sh"

id=$("$BGEXEC" submit workflow --max-attempts 3 '{"steps": [{"id": "r", "run": ["echo", "hi"]}]}')
wait_status "$id" failed 20
msg=$(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $id")
[[ $msg == *--allow-run* ]] || fail "error message: $msg"
[[ $(sql "SELECT error->>'retryable' FROM bgexec.job WHERE id = $id") == false ]] || fail "retryable"
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $id") == 1 ]] || fail "a refused run was retried"

u=$("$BGEXEC" submit no-such-action '{"x": 1}')
wait_status "$u" failed 20
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $u") == *no-such-action* ]] || fail "unknown action error"
# submit --wait says why a job did not complete, on stderr (it printed
# "N failed" alone, and took a status to learn of the unknown action)
set +e
out=$(timeout 60 "$BGEXEC" submit no-such-action --wait 2>"$E2E_DIR/wait.err"); rc=$?
set -e
((rc == 1)) && [[ $out =~ ^[0-9]+\ failed$ ]] || fail "submit --wait of an unknown action: exit $rc, stdout '$out'"
grep -q "^bgexec: job ${out% *} failed: .*no-such-action" "$E2E_DIR/wait.err" \
  || fail "submit --wait did not say why: $(cat "$E2E_DIR/wait.err")"

# Without --allow-run, an action step's env sets no variable unless the
# action's config entry lists it: a BASH_FUNC_cat%% would run the tenant's
# shell code in place of the script's `cat`, LD_PRELOAD a library of its
# choosing, TAR_OPTIONS (--checkpoint-action=exec=) a command in any action
# that runs tar, PSQLRC=/proc/self/environ the lines another variable
# writes; a denylist of such variables missed those (it passed COLOR and
# TAR_OPTIONS alike).  The step fails, not retryable.
printf '#!/bin/sh\ncat >/dev/null\ntar -cf "%s/out.tar" -C "%s" w1.log && echo "{\\"tarred\\": true}"\n' \
  "$E2E_DIR" "$E2E_DIR" >"$E2E_DIR/tar-act.sh"
chmod +x "$E2E_DIR/tar-act.sh"
start_worker w3 --queue tar --action "tar-act=$E2E_DIR/tar-act.sh"
for var in 'BASH_FUNC_cat%%' LD_PRELOAD PATH GIT_SSH_COMMAND PGHOST PGOPTIONS COLOR TAR_OPTIONS; do
  b=$("$BGEXEC" submit workflow --queue tar --max-attempts 3 "{\"steps\": [{\"id\": \"a\", \"action\": \"tar-act\",
     \"env\": {\"$var\": \"--checkpoint=1 --checkpoint-action=exec=touch\\\\ $E2E_DIR/injected\"}}]}")
  wait_status "$b" failed 20
  msg=$(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $b")
  [[ $msg == "env cannot set $var for action \"tar-act\": this worker's configuration lists no variable for it"*--allow-run* ]] \
    || fail "env $var: $msg"
  [[ $(sql "SELECT error->>'retryable' FROM bgexec.job WHERE id = $b") == false ]] || fail "env $var retryable"
done
[[ ! -e $E2E_DIR/injected ]] || fail "a step's env ran the tenant's code in the action"
b=$("$BGEXEC" submit workflow --queue tar '{"steps": [{"id": "a", "action": "tar-act", "env": {}}]}')
wait_status "$b" completed 20
[[ -s $E2E_DIR/out.tar && ! -e $E2E_DIR/injected ]] || fail "tar-act without env"
kill -0 "$PID_w3" || fail "worker w3 died"
b=$("$BGEXEC" submit workflow '{"steps": [{"id": "a", "action": "bash-act"}]}')
wait_status "$b" completed 20
[[ $(sql "SELECT result->'a'->>'pw' || ' ' || (result->'a'->>'db') FROM bgexec.job WHERE id = $b") == "none none" ]] \
  || fail "the worker's credentials reached the action: $(sql "SELECT result FROM bgexec.job WHERE id = $b")"

# An action whose config file entry lists its env ({"path", "env"}) takes
# those variables only, with --allow-run too: a variable no denylist names
# (SHADE) is refused as LD_PRELOAD is; the listed one reaches the action.
printf '{"actions": {"bash-act": {"path": "%s", "env": ["COLOR"]}, "free-act": "%s"}}\n' \
  "$E2E_DIR/bash-act.sh" "$E2E_DIR/bash-act.sh" >"$E2E_DIR/w2.json"
start_worker w2 --config "$E2E_DIR/w2.json" --queue listed --allow-run
for var in SHADE LD_PRELOAD; do
  b=$("$BGEXEC" submit workflow --queue listed "{\"steps\": [{\"id\": \"a\", \"action\": \"bash-act\", \"env\": {\"$var\": \"x\"}}]}")
  wait_status "$b" failed 20
  msg=$(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $b")
  [[ $msg == "env cannot set $var for action \"bash-act\": this worker's configuration allows only COLOR" ]] \
    || fail "listed env $var: $msg"
done
b=$("$BGEXEC" submit workflow --queue listed '{"steps": [{"id": "a", "action": "bash-act", "env": {"COLOR": "red"}}]}')
wait_status "$b" completed 20
[[ $(sql "SELECT result->'a'->>'color' FROM bgexec.job WHERE id = $b") == red ]] || fail "listed env COLOR"
# With --allow-run, an action with no env list takes any variable a step sets.
b=$("$BGEXEC" submit workflow --queue listed '{"steps": [{"id": "a", "action": "free-act", "env": {"COLOR": "blue"}}]}')
wait_status "$b" completed 20
[[ $(sql "SELECT result->'a'->>'color' FROM bgexec.job WHERE id = $b") == blue ]] || fail "--allow-run: unlisted action's env COLOR"
kill -0 "$PID_w2" || fail "worker w2 died"

n=$("$BGEXEC" submit noop)
wait_status "$n" completed 20
set +e; "$BGEXEC" submit noop --wait >/dev/null; rc=$?; set -e
((rc == 0)) || fail "submit --wait exit $rc"
set +e; "$BGEXEC" submit workflow '{"steps": [{"id": "r", "run": ["true"]}]}' --wait >/dev/null; rc=$?; set -e
((rc == 1)) || fail "submit --wait of a failing job: exit $rc"
kill -0 "$PID_w1" || fail "worker died"
ok

#!/usr/bin/env bash
# A step process leads a session of its own (its process group as before:
# pgid = pid), so it has no controlling terminal.  A worker started on a
# terminal (here a pty, under script(1)) ran its steps in background groups
# of its own session: a step that read /dev/tty (an ssh, sudo or git
# prompt) was stopped by SIGTTIN for ever, its job running.  Now /dev/tty
# cannot be opened (ENXIO) and the step goes on.  A stop still ends the
# step's whole group.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57982
P=$E2E_DIR/pids
E2E_PIDFILES+=("$P")

script -qfc "exec '$BGEXEC' worker --id t1 --lease 10 --allow-run >>'$E2E_DIR/t1.log' 2>&1" /dev/null \
  </dev/null >/dev/null 2>&1 &
E2E_PIDS+=("$!")
script_pid=$!
wait_for 10 pgrep -P "$script_pid" || fail "script did not start the worker"
worker=$(pgrep -P "$script_pid")
E2E_PIDS+=("$worker")
wait_for 10 grep -q 'msg="worker started"' "$E2E_DIR/t1.log" || fail "the worker did not start"
tty=$(ps -o tty= -p "$worker" | tr -d ' ')
[[ -n $tty && $tty != "?" ]] || fail "the worker has no controlling terminal under script: '$tty'"

# The step reads its answer from the terminal; it has none.
id=$("$BGEXEC" submit workflow '{"steps": [
  {"id": "ask", "run": ["sh", "-c", "read x < /dev/tty || echo no-tty"]},
  {"id": "ids", "run": ["sh", "-c", "echo $$ $(ps -o sid=,pgid=,tty= -p $$)"]}]}') || fail submit
wait_for 15 job_ended "$id" || {
  ps -o pid=,stat=,tty=,args= --ppid "$worker" >&2 || true
  fail "the step reading /dev/tty did not end: job $id is $(job_status "$id")"
}
[[ $(job_status "$id") == completed ]] \
  || fail "job $id is $(job_status "$id"): $(sql "SELECT error FROM bgexec.job WHERE id = $id")"
[[ $(sql "SELECT result->>'ask' FROM bgexec.job WHERE id = $id") == no-tty ]] \
  || fail "the step opened a terminal: $(sql "SELECT result FROM bgexec.job WHERE id = $id")"
read -r pid sid pgid steptty <<<"$(sql "SELECT result->>'ids' FROM bgexec.job WHERE id = $id")"
[[ $sid == "$pid" && $pgid == "$pid" && $steptty == "?" ]] \
  || fail "step process $pid: session $sid, group $pgid, terminal $steptty (expected $pid, $pid, ?)"

# A stop kills the step's group (its leader and a child in it).
stopme=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"s\", \"run\": [\"sh\", \"-c\",
  \"echo \$\$ >> $P; sleep 2041 & echo \$! >> $P; wait\"]}]}") || fail submit
wait_for 20 bash -c "[[ \$(wc -l < $P) == 2 ]]" || fail "the step to stop did not start"
mapfile -t left <"$P"
"$BGEXEC" stop "$stopme" >/dev/null || fail stop
wait_status "$stopme" cancelled 10
wait_for 5 gone "${left[@]}" || fail "processes of a stopped step run on: $(ps -o pid=,args= -p "$(IFS=,; echo "${left[*]}")")"

kill -TERM "$worker"
rc=0; wait "$script_pid" || rc=$?
((rc == 0)) || fail "the worker under script exited $rc"
ok

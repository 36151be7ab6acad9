#!/usr/bin/env bash
# kill -9 of a worker whose steps left processes that carry nothing the step
# guard was told of: no BGEXEC_* marker (env -i) and outside the step's
# process group (setsid).  The guard stops them too: a descendant whose
# parent is a step's process, and every process in a group or session a
# step's process leads.  They ran on with init as their parent, beside the
# job's next attempt, while the job was failed/worker_lost.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57984
M=$E2E_DIR/marks
mkdir -p "$M"
chmod 777 "$M"
E2E_PIDFILES+=("$M/chain" "$M/bare")

# Two steps of one job, running side by side:
#  - chain: a detached shell (setsid: a group and session of its own, the
#    marker still on it) starts `sleep 2021` without the marker, in its group;
#  - bare: `env -i setsid sleep 2001`, the marker gone and a session of its
#    own, whose parent is the step's shell.
chain='setsid sh -c "env -i sleep 2021 & echo \$! >> '$M'/chain; echo \$\$ >> '$M'/chain; exec sleep 2022" &
sleep 2023'
bare='env -i setsid sleep 2001 & echo $! >> '$M'/bare; sleep 2002'
start_worker a1 --allow-run --lease 3
job=$("$BGEXEC" submit workflow "$(jq -cn --arg chain "$chain" --arg bare "$bare" \
  '{steps: [{id: "chain", run: ["sh", "-c", $chain]}, {id: "bare", run: ["sh", "-c", $bare]}]}')") || fail submit
# ran: the pids in FILE, N of them, have each exec'd sleep.
ran() {
  local p
  [[ -f $1 && $(wc -l <"$1") == "$2" ]] || return 1
  while read -r p; do [[ $(cat "/proc/$p/comm" 2>/dev/null) == sleep ]] || return 1; done <"$1"
}
wait_for 20 ran "$M/chain" 2 || fail "step chain did not start its detached processes"
wait_for 20 ran "$M/bare" 1 || fail "step bare did not start its detached sleep"
mapfile -t left < <(cat "$M/chain" "$M/bare")
unmarked=("${left[0]}" "${left[2]}")
for p in "${unmarked[@]}"; do
  [[ -z $(tr -d '\0' <"/proc/$p/environ") ]] || fail "process $p was to carry no environment"
done
kill -KILL "$PID_a1"; wait "$PID_a1" 2>/dev/null || true
wait_for 5 gone "${left[@]}" \
  || fail "step processes outlived their worker: $(ps -o pid=,ppid=,pgid=,sid=,stat=,args= -p "$(IFS=,; echo "${left[*]}")")"
wait_for 5 grep -q 'worker gone: its steps were stopped' "$E2E_DIR/a1.log" || fail "no guard log line"

start_worker b1 --allow-run
wait_status "$job" failed 40
[[ $(sql "SELECT error->>'reason' FROM bgexec.job WHERE id = $job") == worker_lost ]] || fail "error reason"
kill -TERM "$PID_b1"; wait "$PID_b1" || true
ok

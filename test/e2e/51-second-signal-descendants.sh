#!/usr/bin/env bash
# A second signal kills every step process and exits at once, a descendant
# that left its step's group too while its parent still runs.
# The worker killed the groups and exited: such a descendant came to the
# worker (its subreaper) only as its parent died, and so to init, and ran
# on; without its BGEXEC_* marker (env -i) the step guard could not tell it
# from any other process either.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57985
F=$E2E_DIR/pids
E2E_PIDFILES+=("$F")

start_worker w1 --allow-run --grace 60 --lease 10
# A chain of two such descendants, neither with the marker: a shell in a
# session of its own (its parent the step's shell) and, in another, its
# sleep 2031.  Each comes to the worker only as its parent dies.
cmd="echo \$\$ >> $F; env -i PATH=\$PATH setsid sh -c 'echo \$\$ >> $F; env -i setsid sleep 2031 & echo \$! >> $F; exec sleep 2033' & sleep 2032"
"$BGEXEC" submit workflow "$(jq -cn --arg cmd "$cmd" '{steps: [{id: "s", run: ["sh", "-c", $cmd]}]}')" >/dev/null \
  || fail submit
# ran: the three pids written, the two detached ones have exec'd sleep (their setsid done).
ran() {
  local p
  [[ $(wc -l <"$F" 2>/dev/null) == 3 ]] || return 1
  for p in $(tail -2 "$F"); do [[ $(cat "/proc/$p/comm" 2>/dev/null) == sleep ]] || return 1; done
}
wait_for 20 ran || fail "the step did not start its detached chain"
mapfile -t left <"$F"
for p in "${left[1]}" "${left[2]}"; do
  [[ $(ps -o sid= -p "$p" | tr -d ' ') == "$p" ]] || fail "process $p is not in a session of its own"
  [[ -z $(tr -d '\0' <"/proc/$p/environ" | grep BGEXEC_) ]] || fail "process $p carries a marker"
done
[[ $(ps -o ppid= -p "${left[2]}" | tr -d ' ') == "${left[1]}" ]] || fail "the chain is not parent and child"
kill -TERM "$PID_w1"
# The second once the first has been handled (two signals that arrive
# before the worker runs are one).
wait_for 20 grep -q 'msg="signal received, draining"' "$E2E_DIR/w1.log" || fail "the worker did not drain at the first signal"
t0=$(date +%s%N)
kill -INT "$PID_w1"
rc=0; wait "$PID_w1" || rc=$?
((rc == 130)) || fail "the worker exited $rc after a second signal"
ms=$((($(date +%s%N) - t0) / 1000000))
echo "# the worker exited ${ms} ms after the second signal" >&2
((ms < 5000)) || fail "the worker took ${ms} ms to exit after a second signal"
wait_for 5 gone "${left[@]}" \
  || fail "step processes outlived a second signal: $(ps -o pid=,ppid=,pgid=,sid=,stat=,args= -p "$(IFS=,; echo "${left[*]}")")"
ok

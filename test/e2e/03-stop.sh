#!/usr/bin/env bash
# stop on a long step → cancelled within a second, no child process left alive.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57943
P=$E2E_DIR/pids
E2E_PIDFILES+=("$P")
start_worker w1 --allow-run

id=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"long\", \"run\": [\"sh\", \"-c\",
  \"echo \$\$ >> $P; trap '' TERM; sleep 60 & sleep 60 & wait\"]}]}") || fail submit
wait_for 20 test -s "$P" || fail "step did not start"
pgid=$(head -1 "$P")
[[ $(pgrep -g "$pgid" | wc -l) -ge 3 ]] || fail "expected the step's process tree"

start=$(date +%s%N)
[[ $("$BGEXEC" stop "$id" --json) == *'"result":"running"'* ]] || fail "stop"
wait_status "$id" cancelled 10
ms=$((($(date +%s%N) - start) / 1000000))
# The step ignores TERM: the worker escalates to KILL after its kill grace (0.5 s).
((ms < 3000)) || fail "cancelled after ${ms} ms"
echo "# cancelled after ${ms} ms" >&2
wait_for 5 bash -c "! pgrep -g $pgid" || fail "processes left in the step's group: $(pgrep -g "$pgid" | tr '\n' ' ')"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'cancelled'") == 1 ]] || fail "terminal event"

# a stop of a queued job cancels it at once; the CLI exit code of tail says cancelled
q=$("$BGEXEC" submit noop --queue elsewhere)
"$BGEXEC" stop "$q" >/dev/null
wait_status "$q" cancelled 5
set +e; timeout 10 "$BGEXEC" tail "$q" >/dev/null; rc=$?; set -e
((rc == 1)) || fail "tail exit code $rc for a cancelled job"
kill -0 "$PID_w1" || fail "worker died"
ok

#!/usr/bin/env bash
# A workflow's parallel action steps run at most --step-processes at once
# (BGEXEC_STEP_PROCESSES; by default what the open-file limit holds): every
# step whose needs were done spawned its process at once, and a fan-out of
# 600 steps at an open-file limit of 1024 failed them with EMFILE.  Steps
# past the cap wait, their timeout counting, and a stop ends them waiting.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58016
P=$E2E_DIR/pids
E2E_PIDFILES+=("$P")
mkdir "$E2E_DIR/run"
# An action that counts the step processes alive as it starts: each holds a
# directory from its start to just before it exits, so a count is never
# more than the processes the worker has running.
cat >"$E2E_DIR/par.sh" <<EOF
#!/bin/sh
mkdir "$E2E_DIR/run/\$\$"
ls "$E2E_DIR/run" | wc -l >>"$E2E_DIR/counts"
echo "\$\$" >>"$P"
sleep "\${PAR_SLEEP:-0.5}"
rmdir "$E2E_DIR/run/\$\$"
EOF
chmod +x "$E2E_DIR/par.sh"
fanout() {  # N [STEP-FIELDS]: a workflow of N parallel "par" steps
  local n=$1 extra=${2:-} i steps=""
  for ((i = 1; i <= n; i++)); do steps+="${steps:+, }{\"id\": \"s$i\", \"action\": \"par\"$extra}"; done
  echo "{\"steps\": [$steps]}"
}
most() { sort -n "$E2E_DIR/counts" | tail -1; }
started() { [[ -f $E2E_DIR/counts ]] && wc -l <"$E2E_DIR/counts" || echo 0; }
reset() { rm -rf "$E2E_DIR/counts" "$P" "$E2E_DIR/run"/*; }  # a killed step leaves its directory

# 1. Ten parallel steps, two step processes: at most two alive at a time,
# two at times, and all ten complete.  Through the environment: a worker
# without the setting ignores it (and ran all ten at once).
BGEXEC_STEP_PROCESSES=2 start_worker w1 --lease 5 --action par="$E2E_DIR/par.sh"
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/w1.log" || fail "worker did not start"
id=$("$BGEXEC" submit workflow "$(fanout 10)" --max-attempts 1) || fail submit
wait_status "$id" completed 60
[[ $(started) == 10 ]] || fail "$(started) of 10 steps ran"
[[ $(most) == 2 ]] || fail "$(most) step processes at once, with --step-processes 2 (counts: $(tr '\n' ' ' <"$E2E_DIR/counts"))"
grep -q 'msg="worker started".* step_processes=2 ' "$E2E_DIR/w1.log" \
  || fail "the start line: $(grep 'worker started' "$E2E_DIR/w1.log")"
reset

# 2. A waiting step's timeout counts: with one step process, the second
# step (timeout 1 s) waits for the first (3 s) and times out never started.
kill "$PID_w1"; wait_for 20 gone "$PID_w1" || fail "w1 did not stop"
PAR_SLEEP=3 start_worker w2 --lease 5 --step-processes 1 --action par="$E2E_DIR/par.sh"
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "a", "action": "par"},
  {"id": "b", "action": "par", "timeout": 1}]}' --max-attempts 1) || fail submit
wait_status "$id" failed 30
[[ $(sql "SELECT data->'error'->>'reason' FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed' AND data->>'step' = 'b'") == step_timeout ]] \
  || fail "the waiting step: $(sql "SELECT string_agg(kind || ' ' || data::text, ', ') FROM bgexec.job_event WHERE job_id = $id")"
[[ $(started) == 1 ]] || fail "$(started) steps ran, expected one"
reset
kill "$PID_w2"; wait_for 20 gone "$PID_w2" || fail "w2 did not stop"

# 3. A stop ends a job whose steps wait for a step process: the two running
# are killed, the four waiting never start, the job is cancelled (each
# step's step_failed says stopped), and the worker's step processes are
# all free again: its next fan-out runs two at once.
printf '#!/bin/sh\necho "$$" >>"%s"\nexec sleep 60\n' "$P" >"$E2E_DIR/long.sh"; chmod +x "$E2E_DIR/long.sh"
BGEXEC_STEP_PROCESSES=2 start_worker w3 --lease 5 --action par="$E2E_DIR/par.sh" --action long="$E2E_DIR/long.sh"
long=""
for i in 1 2 3 4 5 6; do long+="${long:+, }{\"id\": \"l$i\", \"action\": \"long\"}"; done
id=$("$BGEXEC" submit workflow "{\"steps\": [$long]}" --max-attempts 1) || fail submit
two() { [[ $(wc -l <"$P" 2>/dev/null) == 2 ]]; }
wait_for 20 two || fail "the first two steps did not start"
sleep 1
two || fail "$(wc -l <"$P") steps started with --step-processes 2"
"$BGEXEC" stop "$id" >/dev/null || fail stop
wait_status "$id" cancelled 20
while read -r p; do wait_for 5 bash -c "! kill -0 $p 2>/dev/null" || fail "step process $p left alive"; done <"$P"
sleep 0.5
two || fail "$(wc -l <"$P") steps started: a waiting step started after the stop"
[[ $(sql "SELECT count(*) FILTER (WHERE data->'error'->>'reason' = 'stopped') || '/' || count(*) FROM bgexec.job_event
          WHERE job_id = $id AND kind = 'step_failed'") == 6/6 ]] \
  || fail "the steps' closing events: $(sql "SELECT string_agg(data::text, ', ') FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed'")"
reset
id=$("$BGEXEC" submit workflow "$(fanout 6)" --max-attempts 1) || fail submit
wait_status "$id" completed 30
[[ $(started) == 6 && $(most) == 2 ]] || fail "after the stop: $(started) steps, $(most) at once"
reset
kill "$PID_w3"; wait_for 20 gone "$PID_w3" || fail "w3 did not stop"

# ... and so does the shutdown: past --grace the running step is killed,
# the waiting ones never start, and the job is queued again
# (worker_shutdown, retryable) with the worker gone.
start_worker w4 --lease 5 --grace 1 --step-processes 1 --action long="$E2E_DIR/long.sh"
id=$("$BGEXEC" submit workflow "{\"steps\": [$long]}" --max-attempts 2) || fail submit
one() { [[ $(wc -l <"$P" 2>/dev/null) == 1 ]]; }
wait_for 20 one || fail "the first step did not start"
kill "$PID_w4"; wait_for 20 gone "$PID_w4" || fail "w4 did not stop"
while read -r p; do wait_for 5 bash -c "! kill -0 $p 2>/dev/null" || fail "step process $p left alive"; done <"$P"
one || fail "$(wc -l <"$P") steps started: a waiting step started in the shutdown"
[[ $(sql "SELECT status || ' ' || (error->>'reason') FROM bgexec.job WHERE id = $id") == "queued worker_shutdown" ]] \
  || fail "the job after the shutdown: $(sql "SELECT status, error FROM bgexec.job WHERE id = $id")"
sql "DELETE FROM bgexec.job" >/dev/null
reset

# 4. Unset, the cap is what the open-file limit holds: at a hard limit of
# 160, (160 - 64 - 10 sql sessions - 3) / 3 = 27.  A fan-out of 100
# steps completes in one attempt; the steps past the descriptors (two
# pipes each once stdin is written) failed with EMFILE.
(ulimit -n 160; exec "$BGEXEC" worker --id w5 --lease 5 --action par="$E2E_DIR/par.sh" >>"$E2E_DIR/w5.log" 2>&1) &
E2E_PIDS+=($!); w5=$!
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/w5.log" || fail "w5 did not start"
grep -q 'msg="worker started".* step_processes=27 ' "$E2E_DIR/w5.log" \
  || fail "w5's start line: $(grep 'worker started' "$E2E_DIR/w5.log")"
! grep -q 'open-file limit is low' "$E2E_DIR/w5.log" || fail "the default warned of its own limit"
id=$("$BGEXEC" submit workflow "$(fanout 100)" --max-attempts 1) || fail submit
wait_for 60 job_ended "$id" || fail "the fan-out did not end"
[[ $(job_status "$id") == completed ]] \
  || fail "the fan-out at a limit of 160: $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $id")"
[[ $(started) == 100 ]] || fail "$(started) of 100 steps ran"
(($(most) <= 27)) || fail "$(most) step processes at once, more than 27"
reset
# Set above what the limit holds, the start-up warning says what it counts.
kill "$w5"; wait_for 20 gone "$w5" || fail "w5 did not stop"
(ulimit -n 160; exec "$BGEXEC" worker --id w6 --lease 5 --step-processes 100 >>"$E2E_DIR/w6.log" 2>&1) &
E2E_PIDS+=($!); w6=$!
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/w6.log" || fail "w6 did not start"
grep -q 'open-file limit is low.* limit=160 wanted=377 .*step_processes=100 sql_steps=10' "$E2E_DIR/w6.log" \
  || fail "w6's warning: $(grep 'open-file' "$E2E_DIR/w6.log")"
kill "$w6"; wait_for 20 gone "$w6" || fail "w6 did not stop"

# 5. Granted in the order asked: with one step process, held 3 s by a or
# b (both ask at once), c asks a second later (it needs a sleep step,
# which holds none).  The one of a and b that waited asked first, so it
# runs before c: c starts last.  (A grant from the back of the queue, c
# before the older waiter, passed the sections above.)
cat >"$E2E_DIR/ord.sh" <<EOF
#!/bin/sh
echo "\$BGEXEC_STEP_ID" >>"$E2E_DIR/order"
case "\$BGEXEC_STEP_ID" in a|b) sleep 3 ;; esac
EOF
chmod +x "$E2E_DIR/ord.sh"
start_worker w7 --lease 10 --step-processes 1 --action ord="$E2E_DIR/ord.sh"
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/w7.log" || fail "w7 did not start"
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "a", "action": "ord"}, {"id": "b", "action": "ord"},
  {"id": "w", "sleep": 1}, {"id": "c", "action": "ord", "needs": ["w"]}]}' --max-attempts 1) || fail submit
wait_status "$id" completed 30
[[ $(tail -1 "$E2E_DIR/order") == c ]] || fail "the steps started in the order $(tr '\n' ' ' <"$E2E_DIR/order")"
ok

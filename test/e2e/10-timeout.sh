#!/usr/bin/env bash
# A job's timeout (deadline = start of the attempt + timeout, on the database
# clock) ends it timed_out: the worker kills the step's process tree and
# finishes it, exactly one terminal event, no child left alive; a job that
# beats its timeout completes as usual.
source "$(dirname "$0")/lib.sh"
# No reconcile but by hand: the worker ends the job at its deadline, and a
# reconcile (the watchdog's every second, the worker's every 5) that ran in
# the tens of milliseconds between the deadline and the worker's finish
# timed the job out first, without the step's job_timeout event checked below.
e2e_cluster 57950 "bgexec.watchdog = off"
P=$E2E_DIR/pids
E2E_PIDFILES+=("$P")
# A 10 s lease: the deadline is the worker's to keep, not one lease later.
start_worker w1 --allow-run --reconcile-interval 3600 --lease 10
# Submitted half a second into the worker's wait for work (await_claim,
# a second at a time): the wait claims it, half a second after it was sent.
wait_for 10 grep -q 'msg=listening' "$E2E_DIR/w1.log" || fail "w1 did not listen"
sleep 0.5

id=$("$BGEXEC" submit workflow --timeout 2s --max-attempts 3 "{\"steps\": [
  {\"id\": \"slow\", \"run\": [\"sh\", \"-c\", \"echo \$\$ >> $P; sleep 60 & wait\"]},
  {\"id\": \"after\", \"needs\": [\"slow\"], \"sleep\": 0}]}") || fail submit
wait_for 20 test -s "$P" || fail "step did not start"
pgid=$(head -1 "$P")
wait_status "$id" timed_out 15
wait_for 5 bash -c "! pgrep -g $pgid" || fail "processes left in the step's group: $(pgrep -g "$pgid" | tr '\n' ' ')"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind IN ('completed', 'failed', 'cancelled', 'timed_out')") == 1 ]] \
  || fail "exactly one terminal event"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_started' AND data->>'step' = 'after'") == 0 ]] \
  || fail "a step after the timeout ran"
# not before its timeout: the worker claimed it in a wait begun half a
# second earlier, and its deadline timer runs from the claim, not from when
# the wait was sent (it ended the job after 1.4-1.5 s when it did)
ran=$(sql "SELECT extract(epoch FROM finished_at - started_at) FROM bgexec.job WHERE id = $id")
awk -v r="$ran" 'BEGIN {exit !(r >= 1.95)}' || fail "timed out ${ran}s after it started, before its 2 s timeout"
# nor a lease after it: the worker's deadline is the claim's deadline, not
# a lease later (with reconcile off nothing else ends the job; a mutant of
# the worker that armed the timer one lease late survived this test)
awk -v r="$ran" 'BEGIN {exit !(r < 7)}' || fail "timed out ${ran}s after it started, 5 s or more past its 2 s timeout"
echo "# timed out ${ran} s after it started (timeout 2 s)" >&2
# ended by the worker at its deadline, not by reconcile after a lease
# check: the step it was running is closed with reason job_timeout, and the
# worker logs the stop (both missing when its deadline timer is not armed:
# reconcile still timed the job out, and a 'lost' heartbeat ended the step)
[[ $(sql "SELECT data->'error'->>'reason' FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed' AND data->>'step' = 'slow'") == job_timeout ]] \
  || fail "the step was not ended by the worker for the job's timeout: $(sql "SELECT string_agg(kind || ' ' || data::text, ' | ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $id")"
grep -q 'msg="stopping job" job_id='"$id"' reason="deadline reached"' "$E2E_DIR/w1.log" || fail "no deadline stop in the worker log"
# the step's error and the job's name the step the timeout ended
[[ $(sql "SELECT (SELECT data->'error'->>'step' FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed')
                 || ' ' || (error->>'step') FROM bgexec.job WHERE id = $id") == "slow slow" ]] \
  || fail "the timed-out step is not named: $(sql "SELECT error FROM bgexec.job WHERE id = $id")"
# timed_out is terminal: no retry, whatever max_attempts says
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $id") == 1 ]] || fail "a timed-out job was retried"

fast=$("$BGEXEC" submit workflow --timeout 30s '{"steps": [{"id": "s", "sleep": 0.2}]}') || fail submit
wait_status "$fast" completed 15
kill -0 "$PID_w1" || fail "worker died"

# A second end during a step's kill grace (a stop 2 s into the 3 s grace
# of its step timeout) keeps the first KILL: the step that ignores TERM
# ends 3 s after its timeout's TERM.  Each end re-armed the KILL a whole
# grace later: 5 s after it.
start_worker w2 --allow-run --queue kq --reconcile-interval 3600 --lease 10 --kill-grace 3
k=$("$BGEXEC" submit workflow --queue kq '{"steps": [{"id": "deaf", "timeout": 1,
  "run": ["sh", "-c", "trap \"\" TERM; sleep 60 & wait; wait"]}]}') || fail submit
wait_for 20 grep -q "msg=\"step timed out\" job_id=$k" "$E2E_DIR/w2.log" || fail "the step did not time out: $(cat "$E2E_DIR/w2.log")"
sleep 2
"$BGEXEC" stop "$k" >/dev/null
wait_for 20 bash -c "[[ \$(psql -qXAt -c \"SELECT count(*) FROM bgexec.job_event WHERE job_id = $k AND kind = 'step_failed'\") == 1 ]]" \
  || fail "the step did not end"
took=$(sql "SELECT extract(epoch FROM f.created_at - s.created_at) FROM bgexec.job_event s, bgexec.job_event f
             WHERE s.job_id = $k AND s.kind = 'step_started' AND f.job_id = $k AND f.kind = 'step_failed'")
echo "# the step ended ${took} s after it started (timeout 1 s, kill grace 3 s, a stop 2 s into it)" >&2
awk -v r="$took" 'BEGIN {exit !(r < 5)}' || fail "the step ended ${took} s after it started: its KILL was put off by the stop"

# A process that exits well inside its step's timeout completes the step,
# though its output is read past the deadline (a descendant of its own
# session holds its stdout: the read gets the 3 s kill grace).  The
# deadline passing in that read failed the step, step_timeout.
e=$("$BGEXEC" submit workflow --queue kq "{\"steps\": [{\"id\": \"quick\", \"timeout\": 2,
  \"run\": [\"sh\", \"-c\", \"env -i /usr/bin/setsid /bin/sleep 30 & echo \$! >> $P; sleep 0.3; echo ok\"]},
  {\"id\": \"beside\", \"run\": [\"sleep\", \"4\"]}]}") || fail submit
wait_for 30 bash -c "[[ \$(psql -qXAt -c \"SELECT status FROM bgexec.job WHERE id = $e\") =~ ^(completed|failed|cancelled|timed_out)\$ ]]" \
  || fail "job $e did not end"
[[ $(job_status "$e") == completed ]] \
  || fail "a step that exited inside its timeout: job $e $(job_status "$e"): $(sql "SELECT string_agg(kind || ' ' || data::text, ' | ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $e")"
[[ $(sql "SELECT data->>'output' FROM bgexec.job_event WHERE job_id = $e AND kind = 'step_completed' AND data->>'step' = 'quick'") == ok ]] \
  || fail "step quick's output: $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $e AND data->>'step' = 'quick'")"
ok

#!/usr/bin/env bash
# SIGTERM: stop claiming, drain within --grace, end what is left by the
# documented rule (failed, retryable, reason worker_shutdown); a second signal
# exits at once and leaves no step process behind.  SIGHUP (a closed
# terminal) drains alike, unless inherited ignored (nohup); serve stops.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57945
P=$E2E_DIR/pids
E2E_PIDFILES+=("$P")
# The workers run --lease 10 (past start_worker's 2 s): nothing here is
# about leases, and a heartbeat stalled on this shared machine's disk must
# not abandon a job.
# draining NAME: NAME's worker has handled its SIGTERM (or SIGHUP).
draining() { grep -q 'msg="signal received, draining"' "$E2E_DIR/$1.log"; }

# 1. drain: the running job finishes, nothing new is claimed, clean exit.
#    The job's step runs until the test says (the file go): b is submitted
#    while the worker drains, once the wait in await_claim that could claim
#    it is gone (begin_drain cancels it; a wait sent before the signal ran
#    until then, claiming what a commit woke it for), then the worker gets
#    a second to (wrongly) claim b before a ends.
start_worker w1 --allow-run --grace 20 --lease 10
a=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"s\", \"run\": [\"sh\", \"-c\",
  \"while [ ! -e $E2E_DIR/go ]; do sleep 0.05; done\"]}]}")
wait_status "$a" running 10
kill -TERM "$PID_w1"
wait_for 20 draining w1 || fail "w1 did not drain at SIGTERM"
# w1's claiming waits sent before now (a wait sent since claims nothing)
t=$(sql "SELECT clock_timestamp()")
old_waits() {
  [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'bgexec worker %'
              AND state = 'active' AND query LIKE '%claim(%' AND query_start < '$t'") == 0 ]]
}
wait_for 20 old_waits || fail "w1's wait in await_claim did not end at its drain"
b=$("$BGEXEC" submit noop)
sleep 1
touch "$E2E_DIR/go"
wait "$PID_w1" || fail "worker exit code $?"
[[ $(job_status "$a") == completed ]] || fail "in-flight job is $(job_status "$a")"
[[ $(job_status "$b") == queued ]] || fail "draining worker claimed a new job"
[[ -n $(sql "SELECT stopped_at FROM bgexec.worker WHERE id = 'w1'") ]] || fail "worker not deregistered"

# 2. grace over: the rule ends the job (failed, retryable → re-queued when attempts remain)
start_worker w2 --allow-run --grace 1 --lease 10
c=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"s\", \"run\": [\"sh\", \"-c\", \"echo \$\$ >> $P; exec sleep 60\"]}]}")
wait_status "$b" completed 10
wait_status "$c" running 10
kill -TERM "$PID_w2"
wait "$PID_w2" || fail "worker exit code $?"
[[ $(job_status "$c") == failed ]] || fail "job left after grace is $(job_status "$c")"
[[ $(sql "SELECT error->>'reason' FROM bgexec.job WHERE id = $c") == worker_shutdown ]] || fail "reason"
pid=$(tail -1 "$P")
wait_for 5 bash -c "! kill -0 $pid" || fail "step process survived the drain"

# 3. second signal: immediate exit, step processes killed
#    (the worker would drain for its 60 s grace; the step sleeps 60 s)
start_worker w3 --allow-run --grace 60 --lease 10
d=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"s\", \"run\": [\"sh\", \"-c\", \"echo \$\$ >> $P; exec sleep 60\"]}]}")
wait_status "$d" running 10
wait_for 10 bash -c "[[ \$(wc -l < $P) -ge 2 ]]" || fail "step did not start"
kill -TERM "$PID_w3"
wait_for 20 draining w3 || fail "w3 did not drain at SIGTERM"
kill -INT "$PID_w3"
wait_for 10 bash -c "! kill -0 $PID_w3" || fail "second signal did not exit the worker"
pid=$(tail -1 "$P")
wait_for 10 bash -c "! kill -0 $pid" || fail "step process survived the second signal"

# 4. SIGHUP drains as SIGTERM does (it killed the worker with 129, leaving
# its job running and its step processes orphaned).  A run step: a job that
# only sleeps is given back at the drain instead (e2e 107).
start_worker w4 --allow-run --grace 20 --lease 10
e=$("$BGEXEC" submit workflow '{"steps": [{"id": "s", "run": ["sleep", "2"]}]}')
wait_status "$e" running 10
kill -HUP "$PID_w4"
set +e; wait "$PID_w4"; rc=$?; set -e
((rc == 0)) || fail "worker exit code $rc after SIGHUP"
[[ $(job_status "$e") == completed ]] || fail "job in flight at SIGHUP is $(job_status "$e")"
[[ -n $(sql "SELECT stopped_at FROM bgexec.worker WHERE id = 'w4'") ]] || fail "worker not deregistered after SIGHUP"
# ... but a SIGHUP inherited as ignored (nohup) stays ignored
(trap '' HUP; exec "$BGEXEC" worker --id w5 --lease 2 >>"$E2E_DIR/w5.log" 2>&1) &
PID_w5=$!; E2E_PIDS+=("$PID_w5")
wait_for 10 grep -q 'worker started' "$E2E_DIR/w5.log" || fail "w5 did not start"
kill -HUP "$PID_w5"; sleep 0.5
kill -0 "$PID_w5" 2>/dev/null || fail "a worker under nohup stopped at SIGHUP"
kill -TERM "$PID_w5"
wait "$PID_w5" || fail "w5 exit code $?"

# 5. serve stops cleanly at SIGHUP (it was killed with 129)
echo '{"t": "postgres"}' >"$E2E_DIR/tokens.json"
"$BGEXEC" serve --listen 127.0.0.1:0 --tokens "$E2E_DIR/tokens.json" >>"$E2E_DIR/serve.log" 2>&1 &
PID_serve=$!; E2E_PIDS+=("$PID_serve")
wait_for 10 grep -q 'msg=serving' "$E2E_DIR/serve.log" || fail "serve did not start"
kill -HUP "$PID_serve"
set +e; wait "$PID_serve"; rc=$?; set -e
((rc == 0)) || fail "serve exit code $rc after SIGHUP"
grep -q 'msg=stopping signal=1' "$E2E_DIR/serve.log" || fail "serve did not log its stop"
ok

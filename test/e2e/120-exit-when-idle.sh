#!/usr/bin/env bash
# bgexec worker --exit-when-idle works off what is due and exits 0 (as
# Graphile Worker's --once, Oban's drain_queue in tests): once it holds no
# job and a claim over its queues finds nothing due.  A job not yet due
# (run_after later) does not keep it running; a job of its own still
# running does, and so do the jobs a capped queue holds back for it.
# Under await_claim (bgexec preloaded) and LISTEN (not).
# Before, the flag was unknown (exit 2): a test had to poll the database
# and kill the worker.
source "$(dirname "$0")/lib.sh"
e2e_cluster 59450

# idle_exit NAME BOUND_S: NAME's worker exits within BOUND_S, with 0, after
# its line `idle: nothing due, exiting`.
idle_exit() {
  local name=$1 bound=$2 pid rc
  pid=PID_$name
  wait_for "$bound" gone "${!pid}" || fail "$name did not exit within $bound s"
  set +e; wait "${!pid}"; rc=$?; set -e
  ((rc == 0)) || fail "$name exit code $rc"
  grep -q 'msg="idle: nothing due, exiting"' "$E2E_DIR/$name.log" || fail "$name did not log its idle exit"
}
claimed() { sed -n 's/.*msg="idle: nothing due, exiting".* claimed=\([0-9]*\).*/\1/p' "$E2E_DIR/$1.log"; }
completed() { sql "SELECT count(*) FROM bgexec.job WHERE status = 'completed'"; }

# (b) an empty queue: exits at its first claim
start_worker b --exit-when-idle
idle_exit b 20
[[ $(claimed b) == 0 ]] || fail "b claimed $(claimed b)"
[[ -n $(sql "SELECT stopped_at FROM bgexec.worker WHERE id = 'b'") ]] || fail "b not deregistered"
# ... and its row stays stopped: a worker that stops within milliseconds
# of its start has its first heartbeat in flight, which set stopped_at
# NULL again when it committed after the deregister (1 in 10 stops)
for i in $(seq 1 20); do
  start_worker "b$i" --exit-when-idle
  idle_exit "b$i" 20
done
[[ $(sql "SELECT count(*) FROM bgexec.worker WHERE id LIKE 'b_%' AND stopped_at IS NOT NULL") == 20 ]] \
  || fail "rows left live: $(sql "SELECT string_agg(id, ',') FROM bgexec.worker WHERE id LIKE 'b_%' AND stopped_at IS NULL")"

# (a) 20 jobs queued: all completed, then it exits
sql "SELECT bgexec.submit('noop') FROM generate_series(1, 20)" >/dev/null
start_worker a --exit-when-idle
idle_exit a 60
[[ $(completed) == 20 ]] || fail "$(completed) of 20 jobs completed"
[[ $(claimed a) == 20 ]] || fail "a claimed $(claimed a)"

# (c) a job due in an hour does not keep it running, and stays queued
later=$("$BGEXEC" submit noop --run-after +1h)
start_worker c --exit-when-idle
idle_exit c 20
[[ $(job_status "$later") == queued ]] || fail "the job due in an hour is $(job_status "$later")"
sql "DELETE FROM bgexec.job WHERE id = $later" >/dev/null

# (d) a 3 s run step in flight: it exits only once its job completed (its
# finish written), claiming nothing meanwhile
d=$("$BGEXEC" submit workflow '{"steps": [{"id": "s", "run": ["sleep", "3"]}]}')
start_worker d --exit-when-idle --allow-run --lease 10
wait_status "$d" running 20
kill -0 "$PID_d" 2>/dev/null || fail "d exited while its job runs"
idle_exit d 60
[[ $(job_status "$d") == completed ]] || fail "d's job is $(job_status "$d") after d exited"
[[ $(claimed d) == 1 ]] || fail "d claimed $(claimed d)"

# a capped queue (max_running 1): the jobs its own running job holds back
# are due once it ends, so it runs them all before it exits
sql "SELECT bgexec.configure_queue('one', max_running => 1)" >/dev/null
sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"s\", \"run\": [\"sleep\", \"0.5\"]}]}', 'one')
     FROM generate_series(1, 3)" >/dev/null
start_worker cap --exit-when-idle --allow-run --lease 10 --queue one
idle_exit cap 60
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = 'one' AND status = 'completed'") == 3 ]] \
  || fail "capped queue: $(sql "SELECT string_agg(status::text, ',') FROM bgexec.job WHERE queue = 'one'")"
[[ $(claimed cap) == 3 ]] || fail "cap claimed $(claimed cap)"

# SIGTERM still drains as before
e=$("$BGEXEC" submit workflow '{"steps": [{"id": "s", "run": ["sleep", "2"]}]}')
start_worker e --exit-when-idle --allow-run --lease 10
wait_status "$e" running 20
kill -TERM "$PID_e"
set +e; wait "$PID_e"; rc=$?; set -e
((rc == 0)) || fail "e exit code $rc after SIGTERM"
[[ $(job_status "$e") == completed ]] || fail "e's job is $(job_status "$e") after its drain"
grep -q 'msg="signal received, draining"' "$E2E_DIR/e.log" || fail "e did not drain at SIGTERM"

# LISTEN (bgexec not preloaded: no await_claim): the same
echo "shared_preload_libraries = ''" >>"$E2E_DIR/pg/data/postgresql.conf"
cluster_restart "$E2E_DIR/pg"
wait_for 20 sql "SELECT 1" || fail "the cluster did not come back"
sql "SELECT bgexec.submit('noop') FROM generate_series(1, 5)" >/dev/null
f=$("$BGEXEC" submit workflow '{"steps": [{"id": "s", "run": ["sleep", "3"]}]}')
before=$(completed)
start_worker f --exit-when-idle --allow-run --lease 10
idle_exit f 60
grep -q 'await_claim unavailable, listening instead' "$E2E_DIR/f.log" || fail "f did not LISTEN"
[[ $(job_status "$f") == completed ]] || fail "f's run job is $(job_status "$f") after f exited"
[[ $(completed) == $((before + 6)) ]] || fail "$(($(completed) - before)) of 6 jobs completed under LISTEN"
[[ $(claimed f) == 6 ]] || fail "f claimed $(claimed f)"

# a worker without the flag stays up with nothing to do
start_worker g
wait_for 10 grep -q 'msg=listening' "$E2E_DIR/g.log" || fail "g did not start"
sleep 2
kill -0 "$PID_g" 2>/dev/null || fail "a worker without --exit-when-idle exited"
kill -TERM "$PID_g"; wait "$PID_g" || fail "g exit code $?"
ok

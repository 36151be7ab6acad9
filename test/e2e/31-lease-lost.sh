#!/usr/bin/env bash
# Invariant 3/2 on the worker side: a heartbeat answering 'lost' for a job
# whose worker is alive and connected (its lease taken back: reconcile on a
# slow heartbeat, an unclaim of a duplicate id, a DBA) makes the worker
# abandon the run at once: its step processes are stopped, and nothing more
# is written for the job. 02-kill9's "again" case only covers a lease taken
# back and re-claimed by the SAME worker (start_job abandons it); here no
# claim follows, so only the heartbeat's 'lost' can stop the step.
# (Found by mutation testing: it failed under Job::on_heartbeat treating "lost" like "ok".)
source "$(dirname "$0")/lib.sh"
e2e_cluster 57981
M=$E2E_DIR/marks; mkdir -p "$M"; chmod 777 "$M"
E2E_PIDFILES+=("$M/pids")
start_worker w1 --allow-run --queue lq
id=$("$BGEXEC" submit workflow --queue lq "{\"steps\": [
  {\"id\": \"s\", \"run\": [\"sh\", \"-c\", \"echo \$\$ >> $M/pids; exec sleep 60\"]}]}") || fail submit
wait_for 20 test -s "$M/pids" || fail "step did not start"
pid=$(head -1 "$M/pids")
# Another lease is current now (the job stays running, so nobody claims it):
# w1's lease is no longer current and its next heartbeat answers 'lost'.
# That lease expires in an hour, so no reconcile ends the job while the test
# looks (with w1's expiry kept, it ran out about when the checks below ran).
sql "UPDATE bgexec.job SET lease = lease + 1000000, lease_expires_at = now() + interval '1 hour' WHERE id = $id" >/dev/null
seq_before=$(sql "SELECT max(seq) FROM bgexec.job_event WHERE job_id = $id")
# heartbeats every lease/3 (0.67 s): the step is gone within a lease; the
# step sleeps a minute, so one left running fails here
wait_for 10 gone "$pid" || fail "the step of a job whose lease was reported lost ran on (pid $pid)"
grep -q 'msg="abandoning job".*reason="lease lost"' "$E2E_DIR/w1.log" || fail "no abandon log line"
sleep 1
[[ $(sql "SELECT max(seq) FROM bgexec.job_event WHERE job_id = $id") == "$seq_before" ]] || fail "events written after lost"
[[ $(job_status "$id") == running ]] || fail "job is $(job_status "$id")"
kill -0 "$PID_w1" || fail "worker died"
ok

#!/usr/bin/env bash
# Invariant 3 on the worker side: a write answered NULL (lease no longer
# current) ends the run at once, before the next heartbeat could say 'lost'.
# A long lease (30 s: a heartbeat every 10 s) leaves the heartbeat out of it.
#  A: a silent step ends, its step_completed (append_event) is refused:
#     the step after it never starts.   (mutation testing: Job::append ignoring NULL)
#  B: a running step's log batch (append_events) is refused: the step is
#     stopped at once.                   (mutation testing: Job::flush_logs ignoring NULL)
source "$(dirname "$0")/lib.sh"
e2e_cluster 57983
M=$E2E_DIR/marks; mkdir -p "$M"; chmod 777 "$M"
E2E_PIDFILES+=("$M/bpid")
start_worker w1 --allow-run --lease 30

a=$("$BGEXEC" submit workflow "{\"steps\": [
  {\"id\": \"s1\", \"run\": [\"sh\", \"-c\", \"touch $M/s1; while [ ! -e $M/go ]; do sleep 0.05; done\"]},
  {\"id\": \"s2\", \"needs\": [\"s1\"], \"run\": [\"sh\", \"-c\", \"echo ran >> $M/s2\"]}]}") || fail submit
wait_for 20 test -e "$M/s1" || fail "s1 did not start"
sql "UPDATE bgexec.job SET lease = lease + 1000000 WHERE id = $a" >/dev/null
touch "$M/go"   # s1 ends now, silently: its step_completed is refused
sleep 2
[[ ! -e $M/s2 ]] || fail "s2 ran after the job's append_event was refused"
wait_for 10 grep -q "job_id=$a reason=\"append_event refused" "$E2E_DIR/w1.log" || fail "no abandon on a refused append_event"

b=$("$BGEXEC" submit workflow "{\"steps\": [
  {\"id\": \"s\", \"run\": [\"sh\", \"-c\", \"echo \$\$ > $M/bpid; while [ ! -e $M/go2 ]; do sleep 0.05; done; echo a log line; exec sleep 60\"]}]}") || fail submit
wait_for 20 test -s "$M/bpid" || fail "b did not start"
sql "UPDATE bgexec.job SET lease = lease + 1000000 WHERE id = $b" >/dev/null
touch "$M/go2"  # the log line's batch is refused (flushed within 250 ms)
# (10 s: as long as a heartbeat may take to say 'lost', but that abandon
# gives another reason, which the grep below does not take)
wait_for 10 gone "$(cat "$M/bpid")" || fail "the step ran on after its log batch was refused"
grep -q "job_id=$b reason=\"append_events refused" "$E2E_DIR/w1.log" || fail "no abandon on a refused append_events"
ok

#!/usr/bin/env bash
# A server that takes the worker's statements and never answers (its backend
# stopped or stuck; the TCP connection, or here the Unix socket, alive and
# acknowledging): the worker drops a heartbeat left unanswered for a quarter
# of the lease (2 s), a finish for that or 2 s, whichever is longer, and
# makes it again on a fresh connection, so a job
# running meanwhile keeps its lease and completes (and, below, a heartbeat
# dropped is made again at once).  An 8 s lease: the
# heartbeat made again must be answered before the lease guard gives the
# job up (1.3 s after the retry is sent; with a 4 s lease it was 0.3 s, for
# a new connection, its prepares and the call, on a loaded machine).  Without the bound the
# heartbeat waits for ever: the worker gives the job up when its lease runs
# out (failed, worker_lost), and a hung finish leaves the job running.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57965
M=$E2E_DIR/marks
mkdir -p "$M"
chmod 777 "$M"

# backend CONNECTION: the server pid of the worker's connection of that name.
backend() { sql "SELECT pid FROM pg_stat_activity WHERE application_name = 'bgexec worker $1'"; }
has_backend() { [[ -n $(backend "$1") ]]; }

start_worker u1 --allow-run --lease 8
# The finish connection opens with the first finish.
id=$("$BGEXEC" submit noop) || fail submit
wait_status "$id" completed 30
wait_for 10 has_backend heartbeat || fail "no heartbeat connection"
wait_for 10 has_backend finish || fail "no finish connection"
hb=$(backend heartbeat)
fin=$(backend finish)

# A job whose step outlasts the lease (8 s), started before the backends stop.
id=$("$BGEXEC" submit workflow "{\"steps\": [
  {\"id\": \"s\", \"run\": [\"sh\", \"-c\", \"echo run >> $M/runs; sleep 11\"]}]}") || fail submit
wait_for 20 test -s "$M/runs" || fail "step did not start"
E2E_STOPPED+=("$hb" "$fin")
kill -STOP "$hb" "$fin"

wait_status "$id" completed 40
[[ $(wc -l <"$M/runs") == 1 ]] || fail "the step ran $(wc -l <"$M/runs") times"
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $id") == 1 ]] || fail "attempt"
grep -q "heartbeat: the database did not answer within 2 s; connection dropped" "$E2E_DIR/u1.log" \
  || fail "no unanswered heartbeat in the log"
grep -q "finish: the database did not answer within 2 s; connection dropped" "$E2E_DIR/u1.log" \
  || fail "no unanswered finish in the log"
# The worker is on fresh connections.
[[ $(backend heartbeat) != "$hb" && $(backend finish) != "$fin" ]] || fail "the stopped backends still serve the worker"

# Continued, the old backends find their client gone and exit; the worker
# carries on.
kill -CONT "$hb" "$fin"
gone() { ! kill -0 "$hb" 2>/dev/null && ! kill -0 "$fin" 2>/dev/null; }
wait_for 20 gone || fail "the old backends did not exit"
id=$("$BGEXEC" submit noop) || fail submit
wait_status "$id" completed 30
kill -TERM "$PID_u1"; wait "$PID_u1" || fail "worker exit status $?"

# A heartbeat dropped unanswered is made again at once, not at the next
# interval.  A 48 s lease: heartbeats 16 s apart, dropped after 12 s.  The
# test stops the heartbeat's backend just after a heartbeat; the next one,
# 16 s later, goes unanswered, and the one after it must reach the database
# about 28 s after the last answered one (16 + 12 and the retry's 100 ms),
# not 32 s (the next interval, which left a twelfth of the lease before the
# lease guard gives the jobs up, and nothing with a kill grace near a third
# of it).  A job runs meanwhile and must keep its lease.
start_worker u2 --allow-run --lease 48
beat() { sql "SELECT extract(epoch FROM heartbeat_at) FROM bgexec.worker WHERE id = 'u2'"; }
wait_for 10 has_backend heartbeat || fail "u2 has no heartbeat connection"
id=$("$BGEXEC" submit workflow "{\"steps\": [
  {\"id\": \"s\", \"run\": [\"sh\", \"-c\", \"echo run >> $M/runs2; sleep 36\"]}]}") || fail submit
wait_for 20 test -s "$M/runs2" || fail "u2's step did not start"
# Just after a heartbeat: the next one is 16 s away.
b0=$(beat)
beat_after() { [[ $(beat) != "$1" ]]; }
wait_for 20 beat_after "$b0" || fail "u2 did not heartbeat"
b1=$(beat)
hb=$(backend heartbeat)
[[ $hb =~ ^[0-9]+$ ]] || fail "not one heartbeat backend: $hb"
E2E_STOPPED+=("$hb")
kill -STOP "$hb"
wait_for 40 beat_after "$b1" || fail "u2's heartbeat was not made again"
b2=$(beat)
grep -q "heartbeat: the database did not answer within 12 s; connection dropped" "$E2E_DIR/u2.log" \
  || fail "no unanswered heartbeat in u2's log"
gap=$(awk -v a="$b1" -v b="$b2" 'BEGIN { printf "%.1f", b - a }')
awk -v g="$gap" 'BEGIN { exit !(g > 27.5 && g < 30.5) }' \
  || fail "u2's heartbeat after the unanswered one came ${gap} s after the last answered (expected about 28 s)"
wait_status "$id" completed 40
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $id") == 1 ]] || fail "u2's job attempt"
kill -CONT "$hb"
kill -TERM "$PID_u2"; wait "$PID_u2" || fail "u2's exit status $?"
ok "heartbeat made again ${gap} s after the last answered one"

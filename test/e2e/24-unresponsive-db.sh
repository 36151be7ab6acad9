#!/usr/bin/env bash
# A server that takes the worker's statements and never answers (its backend
# stopped or stuck; the TCP connection, or here the Unix socket, alive and
# acknowledging): the worker drops a heartbeat left unanswered for a quarter
# of the lease (2 s), a finish for that or 2 s, whichever is longer, and
# makes it again on a fresh connection, so a job
# running meanwhile keeps its lease and completes.  An 8 s lease: the
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
ok

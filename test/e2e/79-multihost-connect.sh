#!/usr/bin/env bash
# A connection string naming several servers (README, "Follow the primary")
# reaches the next one when a server before it hangs: accepts TCP and never
# answers, as a hung server does (a host powered off, its SYN unanswered,
# alike).  libpq moves on after connect_timeout in its blocking connect
# only; the daemon's own bound spent itself on the first server every time,
# and neither the CLI nor a worker ever reached the second.  Each server
# now has its own bound: connect_timeout, else 10 s.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57902
hung=57903
python3 -c "import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $hung)); s.listen(100); time.sleep(600)" &
E2E_PIDS+=("$!")
listening() { python3 -c "import socket; socket.create_connection(('127.0.0.1', $hung), 1).close()" 2>/dev/null; }
wait_for 10 listening || fail "the hung server's port did not open"

db="host=127.0.0.1,$PGHOST port=$hung,$PGPORT dbname=postgres user=postgres connect_timeout=2"
id=$(sql "SELECT bgexec.submit('noop', queue => 'mh')")

# The CLI: past the hung server within its 2 s, to the cluster.
start=$SECONDS
out=$(env -u PGHOST -u PGPORT "$BGEXEC" status "$id" --db "$db" 2>&1) || fail "status through the host list: $out"
((SECONDS - start <= 8)) || fail "status took $((SECONDS - start)) s"
[[ $out == *queued* ]] || fail "status: $out"

# A worker: starts, and runs the job.  Its lease long enough for a call's
# bound (a third of it, the connect included) to pass the hung server.
PGHOST= PGPORT= start_worker mh --db "$db" --queue mh --lease 30
wait_status "$id" completed 30 || fail "the job through the host list: $(job_status "$id")"

# Every server hung: each named, with why, in one error.
db2="host=127.0.0.1,127.0.0.1 port=$hung,$hung dbname=postgres user=postgres connect_timeout=2"
set +e; out=$(env -u PGHOST -u PGPORT "$BGEXEC" status "$id" --db "$db2" 2>&1); rc=$?; set -e
((rc == 3)) || fail "status, every server hung: exit $rc: $out"
[[ $out == *"host 127.0.0.1 port $hung: connect timed out; host 127.0.0.1 port $hung: connect timed out"* ]] \
  || fail "status, every server hung: $out"
ok

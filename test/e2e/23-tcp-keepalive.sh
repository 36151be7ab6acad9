#!/usr/bin/env bash
# Over TCP, the daemon's connections ask the kernel to probe a silent server
# after 10 s (the operating system's default is two hours), so a worker whose
# server vanished without a word (a failover, a NAT that forgot the flow)
# drops the connection and reconnects instead of waiting for hours; a
# conninfo that sets keepalives_idle itself wins.  Read off the worker's
# sockets with ss: the keepalive timer's time left.
source "$(dirname "$0")/lib.sh"
e2e_cluster auto "listen_addresses = '127.0.0.1'"  # TCP: its own port, the kernel's pick
command -v ss >/dev/null || fail "ss (iproute2) is not installed"
tcp="host=127.0.0.1 port=$PGPORT dbname=postgres user=postgres"

# keepalive_timers PID: the keepalive timer of each of PID's connections to
# the server ("7.948ms" under a minute, as ss prints it; "9min57sec", "119min").
keepalive_timers() {
  ss -tnop state established "( dport = :$PGPORT )" |
    sed -n "s/.*pid=$1,.*timer:(keepalive,\([^,]*\),.*/\1/p"
}
# has_timers PID N: PID has N or more connections with a keepalive timer.
has_timers() { (( $(keepalive_timers "$1" | wc -l) >= $2 )); }

# What libpq asks for by default, for comparison: the system's two hours.
psql "$tcp" -qXAtc "SELECT pg_sleep(3)" >/dev/null &
psql_pid=$!
wait_for 10 has_timers "$psql_pid" 1 || fail "psql's connection shows no keepalive timer"
[[ $(keepalive_timers "$psql_pid") == *min* ]] || fail "the system's own keepalive is short already: $(keepalive_timers "$psql_pid")"
wait "$psql_pid"

# The worker's: under a minute, every one of them (control, heartbeat, claim).
# (--lease 10, past start_worker's 2 s: nothing here is about leases, and a
# heartbeat stalled on this shared machine's disk must not abandon the step.)
start_worker k1 --db "$tcp" --lease 10
wait_for 20 has_timers "$PID_k1" 3 || fail "the worker has no three connections with a keepalive timer"
timers=$(keepalive_timers "$PID_k1")
grep -q min <<<"$timers" && fail "worker connections with the system's keepalive: $(tr '\n' ' ' <<<"$timers")"

# A conninfo's own keepalives_idle wins.
start_worker k2 --db "$tcp keepalives_idle=600" --queue other --lease 10
wait_for 20 has_timers "$PID_k2" 3 || fail "k2 has no three connections with a keepalive timer"
timers=$(keepalive_timers "$PID_k2")
grep -qv "^\(9\|10\)min" <<<"$timers" && fail "keepalives_idle=600 in the conninfo did not win: $(tr '\n' ' ' <<<"$timers")"

# And the worker works over it.
id=$("$BGEXEC" submit noop --db "$tcp") || fail submit
wait_status "$id" completed 30

# A sql step's session: the server probes the worker too, so one cut off
# mid-statement is noticed and the statement ended (its connection check).
# The server's side of the step's connection, read while the step runs (it
# runs until stopped once read).
ka=$("$BGEXEC" submit workflow --db "$tcp" '{"steps": [{"id": "q", "sql": "SELECT pg_sleep(30) /* ka-step */"}]}') || fail submit
step_port() {
  sql "SELECT client_port FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30) /* ka-step */' AND pid <> pg_backend_pid()"
}
has_step() { [[ -n $(step_port) ]]; }
wait_for 20 has_step || fail "the sql step did not start"
port=$(step_port)
server_timer() {
  ss -tno state established "( sport = :$PGPORT and dport = :$port )" | sed -n 's/.*timer:(keepalive,\([^,]*\),.*/\1/p'
}
has_server_timer() { [[ -n $(server_timer) ]]; }
wait_for 10 has_server_timer || fail "the server's side of the sql step's connection shows no keepalive timer"
timer=$(server_timer)
[[ $timer != *min* ]] || fail "the server's side of the sql step's connection: keepalive timer \"$timer\""
"$BGEXEC" stop "$ka" >/dev/null || fail "stop $ka"
wait_status "$ka" cancelled 20
kill -TERM "$PID_k1" "$PID_k2"; wait "$PID_k1" "$PID_k2" || true
ok

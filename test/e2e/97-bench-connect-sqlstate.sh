#!/usr/bin/env bash
# `bgexec bench` reports a refused connect with the server's SQLSTATE, as
# the worker and the client do (Connection::connect): its blocking connect
# said 08006 for any failure, a database that does not exist (3D000) or a
# role that does not (28000) alike.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58015
# bench_fails CONNINFO SQLSTATE: bench exits 3 and names SQLSTATE.
bench_fails() {
  local out rc=0
  out=$("$BGEXEC" bench --db "$1" 2>&1) || rc=$?
  [[ $rc == 3 ]] || fail "bench --db '$1' exited $rc: $out"
  [[ $out == *"(SQLSTATE $2)"* ]] || fail "bench --db '$1' did not name $2: $out"
}
bench_fails "dbname=nosuch" 3D000
bench_fails "user=nosuch dbname=postgres" 28000
# No server at all is still libpq's own failure.
bench_fails "host=$E2E_DIR port=1 dbname=postgres" 08006
ok

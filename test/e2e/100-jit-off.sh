#!/usr/bin/env bash
# The CLI's and the gateway's sessions run with JIT off.  With 2 000
# queues the planner's estimates for queue_stats crossed jit_above_cost,
# and compiling it took 1.3 s of a 1.4 s `bgexec queues` (53 ms without),
# every 3 s for each open dashboard (cardinality review F3).  Here the
# server JIT-compiles every statement (jit_above_cost = 0) and
# pg_stat_statements counts what each compiled: a client's own
# `SELECT ... FROM bgexec.queue_stats` is compiled (so the test can fail),
# `bgexec queues` and GET /v1/queues are not.  A jit the conninfo's
# options name is the client's own, and is kept.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58023 "shared_preload_libraries = 'bgexec,pg_stat_statements'" \
  "jit_above_cost = 0" "jit_inline_above_cost = -1" "jit_optimize_above_cost = -1"
sql "CREATE EXTENSION pg_stat_statements" >/dev/null
for q in a b c; do "$BGEXEC" submit noop --queue "$q" >/dev/null || fail "submit"; done

compiled() {  # compiled LIKE: JIT functions of the statements whose text is LIKE it, and their calls
  sql "SELECT coalesce(sum(jit_functions), 0) || ' ' || coalesce(sum(calls), 0)
         FROM pg_stat_statements WHERE query LIKE '$1'"
}
# The control: a client's own statement is compiled on this server.
sql "SELECT count(*) FROM bgexec.queue_stats" >/dev/null
read -r fns calls <<<"$(compiled 'SELECT count(*) FROM bgexec.queue_stats%')"
((calls >= 1 && fns > 0)) || fail "a psql statement was not JIT-compiled ($fns functions, $calls calls): the test cannot fail"

"$BGEXEC" queues >"$E2E_DIR/queues.out" || fail "bgexec queues: exit $?"
grep -q $'^c\t' "$E2E_DIR/queues.out" || fail "bgexec queues printed: $(cat "$E2E_DIR/queues.out")"
read -r fns calls <<<"$(compiled 'SELECT * FROM bgexec.queue_stats ORDER BY queue%')"
((calls == 1)) || fail "bgexec queues' statement not found ($calls calls)"
((fns == 0)) || fail "bgexec queues' statement was JIT-compiled ($fns functions)"

start_gateway
code=$(curl -s -o "$E2E_DIR/queues.json" -w '%{http_code}' -H "Authorization: Bearer t" "$url/v1/queues")
[[ $code == 200 ]] || fail "GET /v1/queues: $code $(cat "$E2E_DIR/queues.json")"
read -r fns calls <<<"$(compiled 'SELECT *, extract(% FROM oldest_queued_age)%')"
((calls == 1)) || fail "GET /v1/queues' statement not found ($calls calls)"
((fns == 0)) || fail "GET /v1/queues' statement was JIT-compiled ($fns functions)"

# options naming jit: the client's choice stands.
sql "SELECT pg_stat_statements_reset()" >/dev/null
BGEXEC_DB="host=$PGHOST port=$PGPORT user=postgres options='-c jit=on'" "$BGEXEC" queues >/dev/null \
  || fail "bgexec queues with options: exit $?"
read -r fns calls <<<"$(compiled 'SELECT * FROM bgexec.queue_stats ORDER BY queue%')"
((calls == 1 && fns > 0)) || fail "options' jit=on was not kept ($fns functions, $calls calls)"
ok

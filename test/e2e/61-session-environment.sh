#!/usr/bin/env bash
# Databases as DBAs set them up: a LATIN1 database, and an extension dropped
# and created again under a running worker.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57960
# The worker and the CLI choose their encoding themselves: nothing in their
# environment picks it for them (libpq reads PGCLIENTENCODING).  This
# test's own psql sessions speak UTF-8.
unset PGCLIENTENCODING
sql() { PGCLIENTENCODING=UTF8 psql -qXAt -c "$1"; }

# 1. LATIN1: the worker's sessions speak UTF-8 (client_encoding), and the
# server converts.  Left to the database's encoding, the worker's "café"
# was stored as "cafÃ©" (its UTF-8 bytes read as LATIN1), and a payload
# with "é" submitted right failed its job as ill-formed UTF-8.
createdb -E LATIN1 -T template0 --locale=C latin || fail createdb
PGCLIENTENCODING=UTF8 psql -qX -d latin -c "CREATE EXTENSION bgexec; CREATE TABLE people (name text);" || fail "extension in latin"
export PGDATABASE=latin  # sql, wait_status and the CLI on it
start_worker w1
id=$("$BGEXEC" submit workflow '{"input": {"who": "café"}, "steps": [{"id": "ins",
  "sql": "INSERT INTO people VALUES ($1) RETURNING name, length(name) AS n", "params": ["{{input.who}}"]}]}') \
  || fail "submit to latin"
wait_status "$id" completed 20
[[ $(sql "SELECT name || '|' || length(name) FROM people") == "café|4" ]] \
  || fail "the sql step stored $(sql "SELECT name || '|' || length(name) FROM people")"
[[ $(sql "SELECT result->'ins'->0->>'name' FROM bgexec.job WHERE id = $id") == café ]] \
  || fail "result: $(sql "SELECT result FROM bgexec.job WHERE id = $id")"
# a payload submitted from a UTF-8 client runs, its text reaching the step as sent
id2=$(sql "SELECT bgexec.submit('workflow', '{\"input\": {\"w\": \"naïve\"}, \"steps\": [{\"id\": \"e\", \"sql\": \"SELECT \$1::text AS w, length(\$1) AS n\", \"params\": [\"{{input.w}}\"]}]}')")
wait_status "$id2" completed 20
[[ $(sql "SELECT (result->'e'->0->>'w') || '|' || (result->'e'->0->>'n') FROM bgexec.job WHERE id = $id2") == "naïve|5" ]] \
  || fail "a UTF-8 client's payload: $(sql "SELECT result FROM bgexec.job WHERE id = $id2")"
# a character LATIN1 cannot hold is refused by the server (22P05) at submit
if out=$("$BGEXEC" submit workflow '{"input": {"who": "日本"}, "steps": [{"id": "ins",
  "sql": "INSERT INTO people VALUES ($1)", "params": ["{{input.who}}"]}]}' 2>&1); then
  fail "a payload LATIN1 cannot hold was taken: $out"
fi
[[ $out == *22P05* || $out == *"has no equivalent in encoding"* ]] || fail "refusal: $out"
kill -0 "$PID_w1" || fail "the worker died"

# 2. DROP EXTENSION and CREATE EXTENSION under a running worker: its
# prepared statements' result types changed (bgexec.job_status is another
# type), which failed every job's finish with "cached plan must not change
# result type" until the worker restarted
export PGDATABASE=postgres
start_worker w2
"$BGEXEC" submit noop --wait >/dev/null || fail "a job before the drop"
sql "DROP EXTENSION bgexec CASCADE" >/dev/null || fail drop
sql "CREATE EXTENSION bgexec" >/dev/null || fail create
for i in 1 2 3; do
  out=$(timeout 30 "$BGEXEC" submit noop --wait 2>&1) || fail "job $i after the extension was created again: $out; $(sql "SELECT id, status, error FROM bgexec.job")"
done
grep -q "preparing it again" "$E2E_DIR/w2.log" || fail "no re-prepare logged"
ok

#!/usr/bin/env bash
# A database without the extension: the client commands and the worker say
# what to do.  They said only `schema "bgexec" does not exist` (or
# `relation "bgexec.job" …`), the worker with the statement's LINE and
# caret.  And a login the server refuses is an error with a hint.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58005
psql -qX -c "CREATE DATABASE noext" >/dev/null
hint='is the bgexec extension installed in this database? (CREATE EXTENSION bgexec, as a superuser)'
# A bgexec function missing (dropped extension, or one older than the binary).
fhint='is the bgexec extension installed in this database, from the same source as this binary? (CREATE EXTENSION bgexec, as a superuser; an older one lacks functions this binary calls: README, Troubleshooting)'
for cmd in "status 1" "submit noop" queues; do
  rc=0; "$BGEXEC" $cmd --db dbname=noext >/dev/null 2>"$E2E_DIR/err" || rc=$?
  ((rc == 3)) || fail "bgexec $cmd in a database without the extension: exit $rc: $(cat "$E2E_DIR/err")"
  grep -qxF "  hint: $hint" "$E2E_DIR/err" || fail "bgexec $cmd without the extension: no hint: $(cat "$E2E_DIR/err")"
done
rc=0; timeout 20 "$BGEXEC" worker --db dbname=noext >"$E2E_DIR/noext.log" 2>&1 || rc=$?
((rc == 3)) || fail "worker in a database without the extension: exit $rc: $(cat "$E2E_DIR/noext.log")"
grep 'msg="cannot register worker"' "$E2E_DIR/noext.log" | grep -F "hint=\"$hint\"" | grep -qvF 'LINE 1' \
  || fail "worker without the extension: $(cat "$E2E_DIR/noext.log")"
# After DROP EXTENSION, which leaves the schema behind, the functions are
# gone (42883): the CLI, the worker and the gateway gave the server's hint,
# "You might need to add explicit type casts", not the missing extension.
psql -qX -c "CREATE DATABASE dropped" >/dev/null
psql -qX -d dropped -c "CREATE EXTENSION bgexec" -c "DROP EXTENSION bgexec" >/dev/null
[[ $(psql -qXAt -d dropped -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'bgexec'") == 1 ]] || fail "no schema left"
rc=0; "$BGEXEC" submit noop --db dbname=dropped >/dev/null 2>"$E2E_DIR/err" || rc=$?
((rc == 3)) || fail "bgexec submit after DROP EXTENSION: exit $rc: $(cat "$E2E_DIR/err")"
grep -qxF "  hint: $fhint" "$E2E_DIR/err" || fail "bgexec submit after DROP EXTENSION: $(cat "$E2E_DIR/err")"
rc=0; timeout 20 "$BGEXEC" worker --db dbname=dropped >"$E2E_DIR/dropped.log" 2>&1 || rc=$?
((rc == 3)) || fail "worker after DROP EXTENSION: exit $rc: $(cat "$E2E_DIR/dropped.log")"
grep 'msg="cannot register worker"' "$E2E_DIR/dropped.log" | grep -qF "hint=\"$fhint\"" \
  || fail "worker after DROP EXTENSION: $(cat "$E2E_DIR/dropped.log")"
start_gateway --db dbname=dropped
body=$(curl -s -H 'Authorization: Bearer t' -H 'Content-Type: application/json' -d '{"kind": "noop"}' "$url/v1/jobs")
jq -e --arg h "$fhint" '.error.hint == $h and .error.sqlstate == "42883"' <<<"$body" >/dev/null \
  || fail "gateway after DROP EXTENSION: $body"
# An extension older than the binary (built from an earlier checkout: one
# version, no upgrade scripts) lacks a function the binary calls: the same
# 42883, and the hint names that case too (it said only "is the extension
# installed", which it is).  Here the function `bgexec jobs` reads through.
psql -qX -c "CREATE DATABASE older" >/dev/null
psql -qX -d older -c "CREATE EXTENSION bgexec" -c "ALTER EXTENSION bgexec DROP FUNCTION bgexec._list_jobs" \
  -c "DROP FUNCTION bgexec._list_jobs" >/dev/null || fail "could not drop _list_jobs"
rc=0; "$BGEXEC" jobs --db dbname=older >/dev/null 2>"$E2E_DIR/err" || rc=$?
((rc == 3)) || fail "bgexec jobs against an older extension: exit $rc: $(cat "$E2E_DIR/err")"
grep -q 'function bgexec._list_jobs' "$E2E_DIR/err" && grep -qxF "  hint: $fhint" "$E2E_DIR/err" \
  || fail "bgexec jobs against an older extension: $(cat "$E2E_DIR/err")"
# A login the server refuses (no such role or database, a NOLOGIN role, CONNECT revoked) is retried, as a
# role or database may be on its way, but said as an error with what to
# check: it was the warning an outage gets, retried for ever.
psql -qX -c "CREATE ROLE nologin NOLOGIN" -c "CREATE ROLE noconn LOGIN" -c "CREATE DATABASE closed" \
  -c "REVOKE CONNECT ON DATABASE closed FROM PUBLIC" >/dev/null
# A log of its own for each: with one file, the wait below could read the
# previous worker's line before the new one's redirection emptied it, and
# send SIGINT before the worker's handler was in place (a background job of
# a script starts with SIGINT ignored): the wait for it hung.
for db in "user=nosuchrole dbname=postgres" "dbname=nosuchdb" "user=nologin dbname=postgres" "user=noconn dbname=closed"; do
  rm -f "$E2E_DIR/refused.log"
  "$BGEXEC" worker --db "$db" >"$E2E_DIR/refused.log" 2>&1 &
  pid=$!; E2E_PIDS+=("$pid")
  wait_for 10 grep -q 'msg="database unavailable, retrying"' "$E2E_DIR/refused.log" || fail "worker --db $db: $(cat "$E2E_DIR/refused.log")"
  kill -INT "$pid"; wait "$pid" || true
  grep 'msg="database unavailable, retrying"' "$E2E_DIR/refused.log" | head -1 | grep '^ts=[^ ]* level=error ' \
    | grep -qF 'hint="the server refused the login: check the user, password and database --db names' \
    || fail "worker --db $db: not an error with a hint: $(cat "$E2E_DIR/refused.log")"
done
# A FATAL that is no refusal for good (a role at its connection limit) stays
# the warning an outage gets, without that hint.
psql -qX -c "CREATE ROLE busy LOGIN CONNECTION LIMIT 0" >/dev/null
"$BGEXEC" worker --db "user=busy dbname=postgres" >"$E2E_DIR/busy.log" 2>&1 &
pid=$!; E2E_PIDS+=("$pid")
wait_for 10 grep -q 'msg="database unavailable, retrying"' "$E2E_DIR/busy.log" || fail "worker as busy: $(cat "$E2E_DIR/busy.log")"
kill -INT "$pid"; wait "$pid" || true
grep 'msg="database unavailable, retrying"' "$E2E_DIR/busy.log" | head -1 | grep '^ts=[^ ]* level=warn ' | grep -F 'too many connections' \
  | grep -qvF 'refused the login' || fail "worker as busy: not the warning an outage gets: $(cat "$E2E_DIR/busy.log")"
ok

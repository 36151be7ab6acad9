#!/usr/bin/env bash
# A database without the extension: the client commands and the worker say
# what to do.  They said only `schema "bgexec" does not exist` (or
# `relation "bgexec.job" …`), the worker with the statement's LINE and
# caret.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58005
psql -qX -c "CREATE DATABASE noext" >/dev/null
hint='is the bgexec extension installed in this database? (CREATE EXTENSION bgexec, as a superuser)'
for cmd in "status 1" "submit noop" queues; do
  rc=0; "$BGEXEC" $cmd --db dbname=noext >/dev/null 2>"$E2E_DIR/err" || rc=$?
  ((rc == 3)) || fail "bgexec $cmd in a database without the extension: exit $rc: $(cat "$E2E_DIR/err")"
  grep -qxF "  hint: $hint" "$E2E_DIR/err" || fail "bgexec $cmd without the extension: no hint: $(cat "$E2E_DIR/err")"
done
rc=0; timeout 20 "$BGEXEC" worker --db dbname=noext >"$E2E_DIR/noext.log" 2>&1 || rc=$?
((rc == 3)) || fail "worker in a database without the extension: exit $rc: $(cat "$E2E_DIR/noext.log")"
grep 'msg="cannot register worker"' "$E2E_DIR/noext.log" | grep -F "hint=\"$hint\"" | grep -qvF 'LINE 1' \
  || fail "worker without the extension: $(cat "$E2E_DIR/noext.log")"
ok

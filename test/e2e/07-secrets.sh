#!/usr/bin/env bash
# {{secrets.NAME}} is resolved on the worker (env BGEXEC_SECRET_NAME or
# --secrets-dir/NAME), reaches the step, and never reaches any table: every
# occurrence in output, logs and errors is masked (grep of a pg_dump).
source "$(dirname "$0")/lib.sh"
# log_statement = 'all': the statements of a sql step are logged, its
# parameters not when one holds a secret
e2e_cluster 57947 "log_statement = 'all'"
S1=s3cr3t-from-env-$RANDOM$RANDOM
S2=s3cr3t-from-file-$RANDOM$RANDOM
mkdir -p "$E2E_DIR/secrets" "$E2E_DIR/seen"; chmod 777 "$E2E_DIR/seen"
printf '%s\n' "$S2" >"$E2E_DIR/secrets/FILETOKEN"
# a secret longer than the 100 bytes an error message quotes of a value
S3=long-$(head -c 90 /dev/urandom | od -An -tx1 | tr -d ' \n')
# a secret holding characters Go's encoding/json writes as \u0026, \u003c, \u003e
S4="pa&ss<wd>-$RANDOM$RANDOM"
BGEXEC_SECRET_ENVTOKEN=$S1 BGEXEC_SECRET_LONGTOKEN=$S3 BGEXEC_SECRET_HTMLTOKEN=$S4 start_worker w1 --allow-run --secrets-dir "$E2E_DIR/secrets"

id=$("$BGEXEC" submit workflow "{\"steps\": [
  {\"id\": \"use\", \"run\": [\"sh\", \"-c\",
    \"echo \\\"\$0 \$1\\\" > $E2E_DIR/seen/args; echo token=\$0; echo file=\$1 >&2; echo '{\\\"t\\\": \\\"'\$0'\\\"}'\",
    \"{{secrets.ENVTOKEN}}\", \"{{secrets.FILETOKEN}}\"]},
  {\"id\": \"leak\", \"needs\": [\"use\"], \"run\": [\"sh\", \"-c\", \"echo failing with \$0 >&2; exit 3\", \"{{secrets.FILETOKEN}}\"]}]}")
wait_status "$id" failed 20
[[ $(cat "$E2E_DIR/seen/args") == "$S1 $S2" ]] || fail "the step did not receive the secrets"
# the environment of step processes carries no BGEXEC_SECRET_* variable
env_id=$("$BGEXEC" submit workflow '{"steps": [{"id": "env", "run": ["sh", "-c", "env | grep -c BGEXEC_SECRET_ || true"]}]}')
wait_status "$env_id" completed 20
[[ $(sql "SELECT result->>'env' FROM bgexec.job WHERE id = $env_id") == 0 ]] || fail "secrets leaked into the step environment"

# a sql step's server notices quoting a secret are the job's log events,
# masked, never lines of the worker's log (they were logged as they came)
sql "CREATE FUNCTION e2e_notice(t text) RETURNS int LANGUAGE plpgsql AS
     \$\$BEGIN RAISE NOTICE 'got %', t; RAISE WARNING 'warned %', t; RETURN 1; END\$\$" >/dev/null
note_id=$("$BGEXEC" submit workflow '{"steps": [{"id": "n", "sql": "SELECT e2e_notice($1) AS r", "params": ["{{secrets.ENVTOKEN}}"]}]}')
wait_status "$note_id" completed 20
[[ $(sql "SELECT string_agg(l, '|' ORDER BY l) FROM bgexec.job_event, jsonb_array_elements_text(data->'lines') l
          WHERE job_id = $note_id AND kind = 'log' AND data->>'stream' = 'notice'") == "NOTICE:  got ***|WARNING:  warned ***" ]] \
  || fail "notices as log events: $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $note_id AND kind = 'log'")"
if grep -q -e "$S1" "$E2E_DIR/w1.log"; then fail "a secret reached the worker log through a notice"; fi
# nor lines of the server's log: there a WARNING quoting it, an error
# quoting it (invalid input syntax for type integer: "<secret>") and the
# parameters of a logged statement are not written
cast_id=$("$BGEXEC" submit workflow '{"steps": [{"id": "c", "sql": "SELECT $1::int /* e2e-cast */", "params": ["{{secrets.FILETOKEN}}"]}]}')
wait_status "$cast_id" failed 20
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $cast_id") == *'invalid input syntax for type integer: "***"'* ]] \
  || fail "cast error: $(sql "SELECT error FROM bgexec.job WHERE id = $cast_id")"
grep -q 'e2e-cast' "$E2E_DIR/pg/postgres.log" || fail "the step's statement is not in the server log (log_statement)"
if grep -q -e "$S1" -e "$S2" "$E2E_DIR/pg/postgres.log"; then
  fail "a secret reached the server log: $(grep -e "$S1" -e "$S2" "$E2E_DIR/pg/postgres.log" | head -3)"
fi

# an "if" that is not a boolean is quoted in the job's error, masked before
# it is cut to 100 bytes (cut first, the secret's first 99 bytes were stored)
if_id=$("$BGEXEC" submit workflow '{"steps": [{"id": "i", "if": "{{secrets.LONGTOKEN}}", "run": ["true"]}]}')
wait_status "$if_id" failed 20
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $if_id") == 'step i: "if" {{secrets.LONGTOKEN}} is "***", not true or false' ]] \
  || fail "if error: $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $if_id")"

# a step printing the secret as Go's json.Marshal writes it: text output,
# stored as the step's stdout and result, never re-masked as parsed JSON
cat >"$E2E_DIR/go-json.sh" <<'EOF'
printf 'go: {"k":"%s"}\n' "$(printf '%s' "$1" | sed 's/&/\\u0026/g; s/</\\u003c/g; s/>/\\u003e/g')"
EOF
go_id=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"go\", \"run\": [\"sh\", \"$E2E_DIR/go-json.sh\", \"{{secrets.HTMLTOKEN}}\"]}]}")
wait_status "$go_id" completed 20
[[ $(sql "SELECT result->>'go' FROM bgexec.job WHERE id = $go_id") == 'go: {"k":"***"}' ]] \
  || fail "Go-escaped secret: result $(sql "SELECT result->>'go' FROM bgexec.job WHERE id = $go_id")"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $go_id AND data::text LIKE '%u003cwd%'") == 0 ]] \
  || fail "Go-escaped secret: in events $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $go_id AND data::text LIKE '%u003cwd%'")"

# pg_dump skips extension tables without pg_extension_config_dump, so the
# bgexec tables are copied out explicitly next to the dump.
pg_dump --data-only >"$E2E_DIR/dump.sql" || fail "pg_dump"
for t in $(sql "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname = 'bgexec'"); do
  psql -qX -c "COPY $t TO STDOUT" >>"$E2E_DIR/dump.sql" || fail "copy $t"
done
grep -q "token=\*\*\*" "$E2E_DIR/dump.sql" || fail "masked log line missing from the dump"
if grep -q -F -e "$S1" -e "$S2" -e "${S3:0:40}" -e "$S4" "$E2E_DIR/dump.sql"; then fail "a secret reached the database"; fi
# an unknown secret fails the job with a clear error, not the worker
bad=$("$BGEXEC" submit workflow '{"steps": [{"id": "x", "run": ["echo", "{{secrets.NOPE}}"]}]}')
wait_status "$bad" failed 20
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $bad") == *NOPE* ]] || fail "unknown secret error"
kill -0 "$PID_w1" || fail "worker died"
ok

#!/usr/bin/env bash
# Job execution at the edges: data that crashed the worker, and secrets that
# reached the database in a form the masker did not know.
#  - JSON nested past core::max_json_depth (a step's stdout, a ::progress
#    line, a payload) fails the step or job with a clear error, or stays a
#    log line; the worker (and every other job it runs) lives on.
#  - A multi-line secret (a PEM key) printed to stderr or stdout is masked
#    whole, however the lines and reads fall, not left in the log events
#    line by line.
#  - A secret a step prints JSON-escaped (a quote, a backslash, non-ASCII
#    as Python's json.dumps writes it) is masked in its captured stdout and
#    log lines, not only in its parsed output.
#  - A sql step's error quoting a secret parameter cut short (a database
#    with log_parameter_max_length_on_error > 0) does not keep its prefix,
#    nor a DETAIL quoting the part of it the server read as a JSON token.
#  - Nor does a step's stdout that reaches the 16 MiB cap in a secret (the
#    step fails; the first 16 MiB were its output).
source "$(dirname "$0")/lib.sh"
e2e_cluster 57961
mkdir -p "$E2E_DIR/secrets"
PEM_1=AAAAsecretline1-$RANDOM$RANDOM
PEM_2=BBBBsecretline2-$RANDOM$RANDOM
printf -- '-----BEGIN KEY-----\n%s\n%s\n-----END KEY-----\n' "$PEM_1" "$PEM_2" >"$E2E_DIR/secrets/PEM"
QUOTED_1=quo-$RANDOM$RANDOM
QUOTED_2=ted-$RANDOM$RANDOM
printf '%s"%s\\x' "$QUOTED_1" "$QUOTED_2" >"$E2E_DIR/secrets/QUOTED"  # quo-N"ted-N\x
UNI_1=p$RANDOM$RANDOM
printf '%s\303\244ssw\303\266rd' "$UNI_1" >"$E2E_DIR/secrets/UNI"  # pNNNässwörd
SQLPW_1=sqlpw-$RANDOM$RANDOM
printf '%s-and-the-rest-of-it' "$SQLPW_1" >"$E2E_DIR/secrets/SQLPW"
JSONPW_1=jsonpw$RANDOM$RANDOM
printf '%s-and-more' "$JSONPW_1" >"$E2E_DIR/secrets/JSONPW"  # read as JSON: token "jsonpwNNN" is invalid
start_worker w1 --allow-run --secrets-dir "$E2E_DIR/secrets"

# no_secret_in_db WHAT: fails when any secret of this test is in a bgexec table.
no_secret_in_db() {
  local t
  : >"$E2E_DIR/dump.txt"
  for t in $(sql "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname = 'bgexec'"); do
    psql -qX -c "COPY $t TO STDOUT" >>"$E2E_DIR/dump.txt" || fail "copy $t"
  done
  if grep -n -F -e "$PEM_1" -e "$PEM_2" -e "$QUOTED_1" -e "$QUOTED_2" -e "$UNI_1" -e "${SQLPW_1:0:10}" -e "$JSONPW_1" "$E2E_DIR/dump.txt" >&2; then fail "a secret reached the database: $1"; fi
}

# sql_step_fails STEP SQL PARAM: a workflow of one sql step with one
# parameter, which must fail; its id in $job and its error message in $msg.
sql_step_fails() {
  job=$("$BGEXEC" submit workflow "$(jq -nc --arg id "$1" --arg sql "$2" --arg p "$3" \
    '{steps: [{id: $id, sql: $sql, params: [$p]}]}')") || fail "submit $1"
  wait_status "$job" failed 20
  msg=$(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $job")
}

# --- deep JSON ---------------------------------------------------------------
# A run step printing 200 000 nested arrays (400 kB): the recursive copy of the
# parsed output overflowed the worker's stack (SIGSEGV, every job lost).
deep=$("$BGEXEC" submit workflow '{"steps": [{"id": "deep", "run": ["python3", "-c",
  "print(\"[\" * 200000 + \"]\" * 200000)"]}]}') || fail submit
wait_status "$deep" failed 20
kill -0 "$PID_w1" || fail "worker died on a deeply nested step output"
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $deep") == *"nested deeper than 512 levels"* ]] \
  || fail "deep output error: $(sql "SELECT error FROM bgexec.job WHERE id = $deep")"
# A ::progress line nested too deep is kept as a log line; the job completes
# (the batch holding it failed the job with PostgreSQL's stack depth error).
prog=$("$BGEXEC" submit workflow '{"steps": [{"id": "p", "run": ["python3", "-c",
  "import sys; sys.stderr.write(\"::progress \" + \"[\" * 30000 + \"]\" * 30000 + \"\\n\"); print(1)"]}]}') || fail submit
wait_status "$prog" completed 20
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $prog AND kind = 'log'
          AND data->'lines'->>0 LIKE '::progress [[[%'") == 1 ]] || fail "deep progress line not kept as a log line"
# A payload deeper than the limit fails its job, not the worker.  submit
# refuses one (54000), so it is written past submit: submitted, then its
# payload replaced in the same transaction (a server whose max_stack_depth
# lets jsonb take it).
if sql "SELECT bgexec.submit('noop', ('{\"a\": ' || repeat('[', 512) || repeat(']', 512) || '}')::jsonb)" \
     2>"$E2E_DIR/deep.err"; then fail "submit took a payload 513 levels deep"; fi
grep -q "payload nested deeper than 512 levels" "$E2E_DIR/deep.err" || fail "submit error: $(cat "$E2E_DIR/deep.err")"
deep_payload=$(psql -qXAt -c "SET max_stack_depth = '7MB'" -c "BEGIN" \
  -c "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"a\", \"run\": [\"true\"]}]}')" \
  -c "UPDATE bgexec.job SET payload = ('{\"steps\": [{\"id\": \"a\", \"run\": [\"true\"]}], \"input\": '
        || repeat('[', 30000) || repeat(']', 30000) || '}')::jsonb
      WHERE id = currval(pg_get_serial_sequence('bgexec.job', 'id'))" -c "COMMIT" | head -1) \
  || fail "submit deep payload"
wait_status "$deep_payload" failed 20
kill -0 "$PID_w1" || fail "worker died on a deeply nested payload"
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $deep_payload") == "payload nested deeper than 512 levels" ]] \
  || fail "deep payload error: $(sql "SELECT error FROM bgexec.job WHERE id = $deep_payload")"
# Nesting within the limit is unchanged.
fine=$("$BGEXEC" submit workflow '{"steps": [{"id": "n", "run": ["python3", "-c",
  "print(\"[\" * 400 + \"]\" * 400)"]}]}') || fail submit
wait_status "$fine" completed 20

# --- secrets ----------------------------------------------------------------
# The key to stderr line by line, one read each (and with the line before it
# in the same read), then to stdout at once: each line of it was its own log
# line, masked alone, so none matched and all were stored.
pem=$("$BGEXEC" submit workflow '{"steps": [{"id": "pem", "run": ["python3", "-c",
  "import sys, time\nfor l in (\"key:\\n\" + sys.argv[1]).split(\"\\n\"):\n  sys.stderr.write(l + \"\\n\"); sys.stderr.flush(); time.sleep(0.05)\nprint(\"head\\n\" + sys.argv[1] + \"\\ntail\")",
  "{{secrets.PEM}}"]}]}') || fail submit
wait_status "$pem" completed 20
no_secret_in_db "a multi-line secret in log lines"
[[ $(sql "SELECT string_agg(l, '|' ORDER BY seq, n) FROM bgexec.job_event, jsonb_array_elements_text(data->'lines') WITH ORDINALITY AS x(l, n)
          WHERE job_id = $pem AND kind = 'log'") == "key:|***|head|***|tail" ]] \
  || fail "masked lines: $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $pem AND kind = 'log'")"
# JSON on stdout (as an action writes its output) and on stderr, escaped:
# the parsed output was masked, the captured stdout and the lines were not.
esc=$("$BGEXEC" submit workflow '{"steps": [{"id": "esc", "run": ["python3", "-c",
  "import json, sys\nd = {\"q\": sys.argv[1], \"u\": sys.argv[2], \"k\": sys.argv[3]}\nsys.stderr.write(json.dumps(d) + \"\\n\")\nprint(json.dumps(d))",
  "{{secrets.QUOTED}}", "{{secrets.UNI}}", "{{secrets.PEM}}"]}]}') || fail submit
wait_status "$esc" completed 20
no_secret_in_db "a JSON-escaped secret"
[[ $(sql "SELECT data->>'stdout' FROM bgexec.job_event WHERE job_id = $esc AND kind = 'step_completed'") \
   == '{"q": "***", "u": "***", "k": "***"}' ]] \
  || fail "stdout: $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $esc AND kind = 'step_completed'")"
# The server quotes the parameter in the error's CONTEXT, cut to 16 bytes
# by the database's setting: masked in full, a prefix went through.
sql "ALTER DATABASE postgres SET log_parameter_max_length_on_error = 16" >/dev/null
sql_step_fails cast 'SELECT $1::int' '{{secrets.SQLPW}}'
no_secret_in_db "a sql parameter cut short in an error"
[[ $msg == *'integer: "***"'* ]] || fail "sql error: $msg"
# a step without a secret parameter keeps the server's setting
sql_step_fails plain 'SELECT $1::int' not-a-secret-number
[[ $msg == *"\$1 = 'not-a-secret-num...'"* ]] || fail "plain sql error: $msg"
sql "ALTER DATABASE postgres RESET log_parameter_max_length_on_error" >/dev/null
# The server's DETAIL and CONTEXT may quote a piece of a parameter no masker
# can know (the JSON token it stopped at): a step with a secret parameter
# keeps the primary message only.
sql_step_fails cast 'SELECT $1::jsonb' '{{secrets.JSONPW}}'
no_secret_in_db "a JSON token of a secret parameter"
[[ $msg == *"invalid input syntax for type json"* ]] || fail "json sql error: $msg"
# 16 MiB - 10 bytes, then the secret: the capture stopped after its first
# 10 bytes, masking the whole missed them, and they were the step's output.
# The step fails now at the cap, and its error quotes nothing of it.
# (A worker with a longer lease: writing 32 MB of step_completed takes the
# server longer than --lease 2.)
start_worker w2 --allow-run --secrets-dir "$E2E_DIR/secrets" --queue big --lease 30
capped=$("$BGEXEC" submit workflow '{"steps": [{"id": "cap", "run": ["python3", "-c",
  "import sys; sys.stdout.write(\"x\" * (16 * 1024 * 1024 - 10) + sys.argv[1] + \"\\n\")", "{{secrets.SQLPW}}"]}]}' \
  --queue big) || fail submit
wait_status "$capped" failed 30
no_secret_in_db "stdout cut at the capture cap"
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $capped") == *"stdout is 16777216 bytes or more"* ]] \
  || fail "capped output: $(sql "SELECT left(error::text, 200) FROM bgexec.job WHERE id = $capped")"

kill -0 "$PID_w1" && kill -0 "$PID_w2" || fail "worker died"
ok

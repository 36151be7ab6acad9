#!/usr/bin/env bash
# Invariant 8 at the exits of a resolved secret that 07-secrets does not
# reach (found by mutation testing of the daemon): an approval step's
# rendered prompt (the 'suspended' event and the job row); the worker's own
# log (a failing step's error quoting the secret is logged as "step
# failed"); a "::progress JSON" line whose JSON escapes a character the
# text's masking did not know ("\/", as PHP's json_encode writes every
# slash), which decoded to the secret in the progress event; and the same
# escape on stdout, kept in the log line and step_completed's stdout.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57980
S=sk/live-$RANDOM$RANDOM          # tokens often hold a '/'
BGEXEC_SECRET_TOK=$S start_worker w1 --allow-run

# 1. an approval prompt that renders a secret: suspended, prompt masked
gate=$("$BGEXEC" submit workflow '{"steps": [
  {"id": "gate", "approval": {"prompt": "deploy with key {{secrets.TOK}}?"}}]}') || fail submit
wait_status "$gate" suspended 20
[[ $(sql "SELECT data->>'prompt' FROM bgexec.job_event WHERE job_id = $gate AND kind = 'suspended'") \
   == "deploy with key ***?" ]] || fail "suspended prompt: $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $gate AND kind = 'suspended'")"

# 2. a step failing with the secret in its error (a program named by it):
#    masked in the job's error, its step_failed event and the worker's log
err=$("$BGEXEC" submit workflow '{"steps": [{"id": "x", "run": ["/nonexistent/{{secrets.TOK}}"]}]}') || fail submit
wait_status "$err" failed 20
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $err") == *'/nonexistent/***'* ]] \
  || fail "job error: $(sql "SELECT error FROM bgexec.job WHERE id = $err")"
sleep 0.5  # the worker's log line follows the step_failed event
if grep -qF -- "$S" "$E2E_DIR/w1.log"; then fail "a secret reached the worker's log: $(grep -F -- "$S" "$E2E_DIR/w1.log" | head -2)"; fi

# 3. escapes the text's masking did not know
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "p", "run": ["sh", "-c",
  "t=\"$0\"; printf \"::progress {\\\"note\\\": \\\"%s\\\"}\\n\" \"$(printf %s \"$t\" | sed s,/,\\\\\\\\/,g)\" >&2; echo done", "{{secrets.TOK}}"]}]}') || fail submit
wait_status "$id" completed 20
got=$(sql "SELECT data FROM bgexec.job_event WHERE job_id = $id AND kind IN ('progress', 'log')")
if sql "SELECT data::text FROM bgexec.job_event WHERE job_id = $id" | grep -qF -- "$S"; then
  fail "a secret reached a progress event: $got"
fi
# The same escape on stdout ('{"t": "sk\/live-..."}', PHP's json_encode):
# the parsed output is masked, but the text (log line, step_completed's
# stdout) keeps the escaped secret, one unescape away from the value.
j=$("$BGEXEC" submit workflow '{"steps": [{"id": "o", "run": ["sh", "-c",
  "printf \"{\\\"t\\\": \\\"%s\\\"}\\n\" \"$(printf %s \"$0\" | sed s,/,\\\\\\\\/,g)\"", "{{secrets.TOK}}"]}]}') || fail submit
wait_status "$j" completed 20
if sql "SELECT data::text FROM bgexec.job_event WHERE job_id = $j" | grep -qF -- "$(printf %s "$S" | sed 's,/,\\\\/,g')"; then
  fail "an escaped secret reached the database (stdout text): $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $j AND kind = 'step_completed'")"
fi

# 4. nothing anywhere in the database
for t in $(sql "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname = 'bgexec'"); do
  psql -qX -c "COPY $t TO STDOUT" >>"$E2E_DIR/dump.sql" || fail "copy $t"
done
if grep -qF -- "$S" "$E2E_DIR/dump.sql"; then fail "a secret reached the database: $(grep -F -- "$S" "$E2E_DIR/dump.sql" | head -2)"; fi
kill -0 "$PID_w1" || fail "worker died"
ok

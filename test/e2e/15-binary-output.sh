#!/usr/bin/env bash
# Output that is not UTF-8 does not fail a step: a run step printing bytes
# like 0xFF 0xFE (stdout and stderr), and a sql step whose result comes back
# in LATIN1, complete; each invalid sequence is stored as U+FFFD.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57955
# The default lease (30 s), not the tests' 2 s: what this test checks is
# the output, not the lease.  The worker turned a step's output into its
# event in one turn of its event loop (4 MB of NUL below: about 0.3 s of
# CPU), past the 1.4 s a 2 s lease leaves the heartbeat on a loaded
# machine; that work is off the loop now (e2e 83), but storing the 12 MB
# of U+FFFD still holds the job's row, and its heartbeat, for a while
# (README, Troubleshooting).
start_worker w1 --allow-run --lease 30

id=$("$BGEXEC" submit workflow '{"steps": [
  {"id": "bin", "run": ["sh", "-c", "printf '"'"'\\377\\376abc'"'"'; printf '"'"'err \\377 line\\n'"'"' >&2"]},
  {"id": "json", "run": ["sh", "-c", "printf '"'"'{\"k\": \"v\\351\"}'"'"'"]},
  {"id": "latin1", "sql": "SELECT set_config('"'"'client_encoding'"'"', '"'"'LATIN1'"'"', true) AS enc, '"'"'caf\u00e9'"'"' AS word"},
  {"id": "after", "needs": ["bin", "json", "latin1"],
   "run": ["sh", "-c", "printf %s \"$0|$1|$2\"", "{{steps.bin.stdout}}", "{{steps.json.output.k}}", "{{steps.latin1.output.0.word}}"]}]}') \
  || fail submit
wait_status "$id" completed 60
fffd=$'\xef\xbf\xbd'
[[ $(sql "SELECT result->>'after' FROM bgexec.job WHERE id = $id") == "$fffd${fffd}abc|v$fffd|caf$fffd" ]] \
  || fail "result: $(sql "SELECT result FROM bgexec.job WHERE id = $id")"
[[ $(sql "SELECT data->>'output' FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_completed' AND data->>'step' = 'bin'") \
   == "$fffd${fffd}abc" ]] || fail "bin output"
# Its stdout is its output's text: the event stores it once.
[[ $(sql "SELECT data ? 'stdout' FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_completed' AND data->>'step' = 'bin'") \
   == f ]] || fail "bin's stdout stored besides its output"
[[ $(sql "SELECT data->'lines'->>0 FROM bgexec.job_event WHERE job_id = $id AND kind = 'log' AND data->>'step' = 'bin' AND data->>'stream' = 'stderr'") \
   == "err $fffd line" ]] || fail "stderr line not stored as a log event with U+FFFD"
# The CLI prints the job and its events (no type_error.316 on the way out).
"$BGEXEC" status "$id" --json >/dev/null || fail "status --json"
timeout 60 "$BGEXEC" tail "$id" --json >/dev/null || fail "tail --json"
if grep -q "type_error" "$E2E_DIR/w1.log"; then fail "type_error in the worker log"; fi
# Numbers past a double (30 digits, 2^64, 20 decimals) go into and out of
# the CLI as written: submit and status rounded them through a double
# (1.2345678901234568e+29 was stored).
exact='{"n": 123456789012345678901234567890, "u": 18446744073709551616, "d": 0.12345678901234567890}'
held=$("$BGEXEC" submit noop --queue nobody "$exact") || fail "submit $exact"
[[ $(sql "SELECT payload::text FROM bgexec.job WHERE id = $held") == '{"d": 0.12345678901234567890, "n": 123456789012345678901234567890, "u": 18446744073709551616}' ]] \
  || fail "stored: $(sql "SELECT payload FROM bgexec.job WHERE id = $held")"
compact='{"d":0.12345678901234567890,"n":123456789012345678901234567890,"u":18446744073709551616}'
"$BGEXEC" status "$held" >"$E2E_DIR/status.out" || fail status
grep -qxF "payload: $compact" "$E2E_DIR/status.out" || fail "status: $(grep payload "$E2E_DIR/status.out")"
"$BGEXEC" status "$held" --json >"$E2E_DIR/status.json" || fail "status --json"
grep -qF "\"payload\":$compact" "$E2E_DIR/status.json" || fail "status --json: $(cat "$E2E_DIR/status.json")"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$E2E_DIR/status.json" || fail "status --json is no JSON"
# The event log too: tail --json and the job's status print numbers as
# stored (tail read them as doubles).
sql "SELECT bgexec.finish(job_id, lease, 'completed', '{\"r\": 2.50, \"n\": 123456789012345678901234567890}')
       FROM bgexec.claim('e2e-hand', '{nobody}', 1)" >/dev/null || fail "finish by hand"
"$BGEXEC" tail "$held" --json >"$E2E_DIR/tail.json" || fail "tail --json"
grep -qF '"result":{"n":123456789012345678901234567890,"r":2.50}' "$E2E_DIR/tail.json" \
  || fail "tail --json: $(cat "$E2E_DIR/tail.json")"
sql "DELETE FROM bgexec.job WHERE id = $held" >/dev/null
# Event data of any shape (a worker role appends log and progress events
# of its own): tail prints it (it threw nlohmann's type_error and exited
# 3), and data no double reads (1e400) is the string of its text, as
# status prints such a result (tail --json printed {}).
odd=$("$BGEXEC" submit noop --queue oddq) || fail submit
lease=$(sql "SELECT lease FROM bgexec.claim('e2e-odd', '{oddq}', 1)")
sql "WITH j AS (UPDATE bgexec.job SET last_seq = last_seq + 5 WHERE id = $odd RETURNING last_seq)
     INSERT INTO bgexec.job_event (job_id, seq, kind, data)
     SELECT $odd, j.last_seq - 5 + v.n, v.k, v.d::jsonb FROM j, (VALUES
       (1, 'started', '{\"attempt\": \"x\", \"worker\": 5}'), (2, 'log', '{\"stream\": 5, \"lines\": \"x\"}'),
       (3, 'progress', '5'), (4, 'suspended', '[1]'), (5, 'log', '{\"lines\": [1e400]}')) v(n, k, d)" >/dev/null \
  || fail "odd events"
sql "SELECT bgexec.finish($odd, $lease, 'completed', '{}')" >/dev/null || fail "finish odd"
timeout 60 "$BGEXEC" tail "$odd" >"$E2E_DIR/odd.out" 2>"$E2E_DIR/odd.err" || fail "tail of odd events: exit $?: $(cat "$E2E_DIR/odd.err")"
grep -qF 'started (attempt x, worker 5)' "$E2E_DIR/odd.out" || fail "tail: $(cat "$E2E_DIR/odd.out")"
grep -qF 'progress  5' "$E2E_DIR/odd.out" || fail "tail: $(cat "$E2E_DIR/odd.out")"
timeout 60 "$BGEXEC" tail "$odd" --json >"$E2E_DIR/odd.json" || fail "tail --json of odd events"
python3 - "$E2E_DIR/odd.json" <<'PY' || fail "tail --json: $(cat "$E2E_DIR/odd.json")"
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
data = [e["data"] for e in events if e["kind"] == "log"][-1]
assert isinstance(data, str) and data.startswith('{"lines": [1000'), data
PY
# A file saved with a UTF-8 byte order mark is read without it (the
# server refused it).
printf '\xef\xbb\xbf{"bom": 1}' >"$E2E_DIR/bom.json"
bom=$("$BGEXEC" submit noop --queue nobody @"$E2E_DIR/bom.json") || fail "submit @bom.json"
[[ $(sql "SELECT payload::text FROM bgexec.job WHERE id = $bom") == '{"bom": 1}' ]] || fail "bom payload"
# A number jsonb holds but no double can (1e400): submit refuses it (22003;
# the CLI's own parser too), but a job can still hold one (written past
# submit, or by an older version): a noop completes whatever its payload; a
# workflow says what it cannot read (it said "payload is not a JSON object").
if sql "SELECT bgexec.submit('noop', '{\"n\": 1e400}')" 2>"$E2E_DIR/submit.err"; then fail "submit took 1e400"; fi
grep -q "payload: a number is out of range for a double precision value" "$E2E_DIR/submit.err" \
  || fail "submit error: $(cat "$E2E_DIR/submit.err")"
# submit_with KIND VALID PAYLOAD: a job submitted with VALID whose payload
# is then set to PAYLOAD in the same transaction; prints its id.
submit_with() {
  sql "BEGIN; SELECT bgexec.submit('$1', '$2');
       UPDATE bgexec.job SET payload = '$3' WHERE id = currval(pg_get_serial_sequence('bgexec.job', 'id'));
       COMMIT;"
}
big_noop=$(submit_with noop '{}' '{"n": 1e400}') || fail "submit noop"
big_flow=$(submit_with workflow '{"steps": [{"id": "a", "sleep": 0}]}' \
  '{"input": {"n": 1e400}, "steps": [{"id": "a", "sleep": 0}]}') || fail "submit workflow"
wait_status "$big_noop" completed 60
wait_status "$big_flow" failed 60
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $big_flow") == "payload cannot be read: "*"number overflow"* ]] \
  || fail "unreadable payload: $(sql "SELECT error FROM bgexec.job WHERE id = $big_flow")"
# run is argv, no shell, in the worker as at submit: a string written past
# submit ran through /bin/sh -c, its templates rendered into the shell's text
shelled=$(submit_with workflow '{"steps": [{"id": "a", "sleep": 0}]}' \
  '{"input": {"x": "; touch '"$E2E_DIR"'/shelled"}, "steps": [{"id": "a", "run": "echo {{input.x}}"}]}') || fail "submit run string"
wait_status "$shelled" failed 60
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $shelled") == *"run must be a non-empty array of strings (argv, no shell)"* ]] \
  || fail "run string: $(sql "SELECT error FROM bgexec.job WHERE id = $shelled")"
[[ ! -e $E2E_DIR/shelled ]] || fail "a run string went through a shell"
# A resume input holding such a number: read as nothing, the completed steps
# ran again and the job suspended again at every resume; then the job
# failed, and retry could not mend it.  resume refuses it (22003) and the
# job waits for a resume it can read.
gated=$("$BGEXEC" submit workflow '{"steps": [{"id": "a", "run": ["echo", "once"]},
  {"id": "gate", "needs": ["a"], "approval": true}, {"id": "c", "needs": ["gate"], "run": ["true"]}]}') || fail submit
wait_status "$gated" suspended 60
if sql "SELECT bgexec.resume($gated, '{\"n\": 1e400}')" 2>"$E2E_DIR/resume.err"; then fail "resume took 1e400"; fi
grep -q "input: a number is out of range for a double precision value" "$E2E_DIR/resume.err" \
  || fail "resume error: $(cat "$E2E_DIR/resume.err")"
[[ $(job_status "$gated") == suspended ]] || fail "job $gated is $(job_status "$gated") after a refused resume"
sql "SELECT bgexec.resume($gated, '{\"n\": 1}')" >/dev/null
wait_status "$gated" completed 60
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $gated AND kind = 'step_started' AND data->>'step' = 'a'") == 1 ]] \
  || fail "step a ran again"
# {{steps.ID.stdout}} is exact on a re-run, whether the event stored the
# stdout (JSON not printed compact) or only the output it renders (text,
# compact JSON): a 100 kB text output is stored once, not twice.
again=$("$BGEXEC" submit workflow '{"steps": [
  {"id": "text", "run": ["sh", "-c", "head -c 100000 /dev/zero | tr '"'"'\\0'"'"' x; echo"]},
  {"id": "pretty", "run": ["printf", "{ \"k\": [1,  2] }\n"]},
  {"id": "compact", "run": ["printf", "{\"k\":[1,2]}"]},
  {"id": "gate", "needs": ["text", "pretty", "compact"], "approval": true},
  {"id": "use", "needs": ["gate"], "run": ["sh", "-c", "printf %s \"${#0}|$1|$2\"",
   "{{steps.text.stdout}}", "{{steps.pretty.stdout}}", "{{steps.compact.stdout}}"]}]}') || fail submit
wait_status "$again" suspended 60
[[ $(sql "SELECT string_agg(format('%s:%s', data->>'step', data ? 'stdout'), ' ' ORDER BY data->>'step')
            FROM bgexec.job_event WHERE job_id = $again AND kind = 'step_completed'") \
   == "compact:f pretty:t text:f" ]] || fail "stdout stored: $(sql "SELECT data->>'step', data ? 'stdout' FROM bgexec.job_event WHERE job_id = $again AND kind = 'step_completed'")"
(( $(sql "SELECT octet_length(data::text) FROM bgexec.job_event WHERE job_id = $again AND kind = 'step_completed' AND data->>'step' = 'text'") < 120000 )) \
  || fail "the 100 kB text output's event is not stored once"
sql "SELECT bgexec.resume($again)" >/dev/null
wait_status "$again" completed 60
[[ $(sql "SELECT result->>'use' FROM bgexec.job WHERE id = $again") == '100000|{ "k": [1,  2] }|{"k":[1,2]}' ]] \
  || fail "stdout after the resume: $(sql "SELECT left(result->>'use', 200) FROM bgexec.job WHERE id = $again")"
# {{steps.ID.stdout}} is the stdout less one trailing newline, once: a step
# that prints "hello\n\n" gives "hello\n" (6 bytes), in this run and after
# a resume.
nl=$("$BGEXEC" submit workflow '{"steps": [{"id": "a", "run": ["printf", "hello\n\n"]},
  {"id": "b", "needs": ["a"], "run": ["sh", "-c", "printf %s \"$0\" | wc -c", "{{steps.a.stdout}}"]},
  {"id": "gate", "needs": ["b"], "approval": true},
  {"id": "c", "needs": ["gate"], "run": ["sh", "-c", "printf %s \"$0\" | wc -c", "{{steps.a.stdout}}"]}]}') \
  || fail submit
wait_status "$nl" suspended 60
sql "SELECT bgexec.resume($nl)" >/dev/null
wait_status "$nl" completed 60
[[ $(sql "SELECT string_agg(data->>'output', ' ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $nl AND kind = 'step_completed' AND data->>'step' IN ('b', 'c')") == "6 6" ]] \
  || fail "{{steps.a.stdout}} of \"hello\\n\\n\" is $(sql "SELECT string_agg(data->>'output', ' ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $nl AND kind = 'step_completed' AND data->>'step' IN ('b', 'c')") bytes, not 6"
# The newline trimmed is \n or \r\n: a lone \r at the end is the output's
# own (it was trimmed as if a newline).
cr=$("$BGEXEC" submit workflow '{"steps": [{"id": "cr", "run": ["printf", "abc\r"]},
  {"id": "crlf", "run": ["printf", "abc\r\n"]}]}') || fail submit
wait_status "$cr" completed 60
[[ $(sql "SELECT octet_length(result->>'cr') || ' ' || octet_length(result->>'crlf') FROM bgexec.job WHERE id = $cr") == "4 3" ]] \
  || fail "outputs of \"abc\\r\" and \"abc\\r\\n\": $(sql "SELECT result FROM bgexec.job WHERE id = $cr")"
# NUL, which PostgreSQL stores in neither text nor jsonb (`find -print0`),
# in stdout, in stderr and as a \u0000 of a JSON output or progress: U+FFFD like invalid
# UTF-8.  The job failed, retryable, on the server's "unsupported Unicode
# escape sequence".
printf '#!/bin/sh\nprintf "x\\000y\\n" >&2\nprintf "a\\000b"\n' >"$E2E_DIR/nul.sh"
printf '%s\n' 'printf "%s\n" '"'"'::progress {"p": "a\u0000b"}'"'"' >&2' >>"$E2E_DIR/nul.sh"
printf '#!/bin/sh\nprintf %%s '"'"'{"k": "a\\u0000b"}'"'"'\n' >"$E2E_DIR/nul-json.sh"
chmod +x "$E2E_DIR/nul.sh" "$E2E_DIR/nul-json.sh"
nul=$("$BGEXEC" submit workflow --max-attempts 1 "{\"steps\": [{\"id\": \"raw\", \"run\": [\"$E2E_DIR/nul.sh\"]},
  {\"id\": \"js\", \"run\": [\"$E2E_DIR/nul-json.sh\"]}]}") || fail submit
wait_status "$nul" completed 60
[[ $(sql "SELECT result->>'raw' || '|' || (result->'js'->>'k') FROM bgexec.job WHERE id = $nul") == "a${fffd}b|a${fffd}b" ]] \
  || fail "NUL output: $(sql "SELECT result FROM bgexec.job WHERE id = $nul")"
[[ $(sql "SELECT data->'lines'->>0 FROM bgexec.job_event WHERE job_id = $nul AND kind = 'log' AND data->>'step' = 'raw' AND data->>'stream' = 'stderr'") \
   == "x${fffd}y" ]] || fail "NUL in a stderr line: $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $nul AND kind = 'log'")"
[[ $(sql "SELECT data->'progress'->>'p' FROM bgexec.job_event WHERE job_id = $nul AND kind = 'progress'") \
   == "a${fffd}b" ]] || fail "NUL in a progress event"

# Binary output in bulk: 4 MB of NUL bytes (a step that cats a gzip file,
# `find -print0` over a tree).  The repair replaced one NUL at a time,
# moving the rest of the text each time: the worker's event loop was held
# for hours (no heartbeat; the job reconciled, its lease lost).
bin=$("$BGEXEC" submit workflow --max-attempts 1 '{"steps": [{"id": "bin", "run": ["head", "-c", "4000000", "/dev/zero"]}]}') \
  || fail submit
wait_status "$bin" completed 120
[[ $(sql "SELECT length(result->>'bin') FROM bgexec.job WHERE id = $bin") == 4000000 ]] \
  || fail "4 MB of NUL: $(sql "SELECT status, length(result->>'bin'), left(error::text, 200) FROM bgexec.job WHERE id = $bin")"

# stdout of 16 MiB or more fails the step, which read the first 16 MiB of
# a larger JSON output as a string output; progress lines count against
# the log cap (1 MiB by default) like log lines
big=$("$BGEXEC" submit workflow '{"steps": [{"id": "big", "run": ["python3", "-c",
  "import json; print(json.dumps({\"big\": \"x\" * 17000000}))"]}]}') || fail submit
wait_status "$big" failed 120
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $big") == *"stdout is 16777216 bytes or more"* ]] \
  || fail "big output: $(sql "SELECT left(error::text, 300) FROM bgexec.job WHERE id = $big")"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $big AND kind = 'step_completed'") == 0 ]] || fail "big output completed"
# A step that writes for ever (`yes`) fails as its stdout reaches the cap,
# its process stopped: it was read for ever, its output thrown away, and
# ended only by a timeout or a stop (the worker spent half a CPU on it).
endless=$("$BGEXEC" submit workflow '{"steps": [{"id": "yes", "run": ["yes"]}]}') || fail submit
wait_status "$endless" failed 120
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $endless") == *"stdout is 16777216 bytes or more"* ]] \
  || fail "endless output: $(sql "SELECT left(error::text, 300) FROM bgexec.job WHERE id = $endless")"
prog=$("$BGEXEC" submit workflow '{"steps": [{"id": "p", "run": ["python3", "-c",
  "import sys\nfor i in range(30000): print(\"::progress {\\\"i\\\": %d, \\\"pad\\\": \\\"%s\\\"}\" % (i, \"p\" * 80), file=sys.stderr)"]}]}') || fail submit
wait_status "$prog" completed 120
bytes=$(sql "SELECT sum(length(data::text)) FROM bgexec.job_event WHERE job_id = $prog AND kind IN ('progress', 'log')")
((bytes < 2000000)) || fail "progress events past the log cap: $bytes bytes"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $prog AND kind = 'log' AND data::text LIKE '%log cap of%'") == 1 ]] \
  || fail "no log cap marker after progress lines"

# Empty lines count against the cap too (8 bytes each besides their own):
# they were free, so `yes "" >&2` stored lines without end, 4.8 million in
# 45 s, the worker at 100 % CPU.  Here 4 million empty stderr lines: at
# most 1 MiB / 8 of them are stored, then the marker.
empty=$("$BGEXEC" submit workflow '{"steps": [{"id": "e", "run": ["sh", "-c", "head -c 4000000 /dev/zero | tr \"\\\\0\" \"\\\\n\" >&2"]}]}') \
  || fail submit
wait_status "$empty" completed 240
lines=$(sql "SELECT sum(jsonb_array_length(data->'lines')) FROM bgexec.job_event WHERE job_id = $empty AND kind = 'log'")
((lines > 1000 && lines <= 1048576 / 8 + 1)) || fail "$lines empty lines stored against a 1 MiB log cap"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $empty AND kind = 'log' AND data::text LIKE '%log cap of%'") == 1 ]] \
  || fail "no log cap marker after empty lines"

# The worker reads numbers as stored (it read doubles: 19.9 and
# 1.2345678901234568e+29 reached a step): a template, a step's JSON output,
# a sql step's rows, a progress event, and sleep and timeout given as
# numbers a double writes otherwise (0.10, 30.50: a step timeout far past
# what a printf takes on a loaded machine).
exact=$("$BGEXEC" submit workflow '{"input": {"amount": 19.90, "big": 123456789012345678901234567890},
  "steps": [
   {"id": "show", "run": ["printf", "%s|%s", "{{input.amount}}", "{{input.big}}"], "timeout": 30.50},
   {"id": "json", "run": ["sh", "-c", "printf \"::progress {\\\"p\\\": 0.50}\\n\" >&2; printf %s \"$0\"",
                          "{\"v\": 2.50, \"w\": {{input.big}}}"]},
   {"id": "q", "sql": "SELECT $1::numeric + 1 AS n, 0.10::numeric AS t", "params": ["{{input.big}}"]},
   {"id": "nap", "sleep": 0.10},
   {"id": "use", "needs": ["json", "q", "nap"],
    "run": ["printf", "%s|%s|%s", "{{steps.json.output.v}}", "{{steps.q.output.0.n}}", "{{steps.json.output}}"]}]}') \
  || fail submit
wait_status "$exact" completed 60
[[ $(sql "SELECT result->>'show' FROM bgexec.job WHERE id = $exact") == "19.90|123456789012345678901234567890" ]] \
  || fail "template: $(sql "SELECT result FROM bgexec.job WHERE id = $exact")"
[[ $(sql "SELECT result->>'use' FROM bgexec.job WHERE id = $exact") \
   == '2.50|123456789012345678901234567891|{"v":2.50,"w":123456789012345678901234567890}' ]] \
  || fail "outputs: $(sql "SELECT result FROM bgexec.job WHERE id = $exact")"
[[ $(sql "SELECT data->'output'::text FROM bgexec.job_event WHERE job_id = $exact AND kind = 'step_completed' AND data->>'step' = 'q'") \
   == '[{"n": 123456789012345678901234567891, "t": 0.10}]' ]] || fail "sql rows: $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $exact AND data->>'step' = 'q'")"
[[ $(sql "SELECT data->'progress'::text FROM bgexec.job_event WHERE job_id = $exact AND kind = 'progress'") == '{"p": 0.50}' ]] \
  || fail "progress: $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $exact AND kind = 'progress'")"
kill -0 "$PID_w1" || fail "worker died"
ok

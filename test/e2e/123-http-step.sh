#!/usr/bin/env bash
# An "http" step calls a service over HTTP from the worker (Boost.Beast on
# its event loop), gated by --allow-http PREFIX as run is by --allow-run.
# A 2xx body is the step's output (JSON, else text) and feeds a later step;
# a 503 with Retry-After is retried after that delay; a 400 is not retried;
# a redirect is not followed; a URL outside the prefixes (or a worker
# without the flag) is refused; the step's http timeout and a stop end a
# request in flight promptly.  https verifies the server's chain (the
# system's store, and --http-ca-file for a private CA) and its name.  The
# old worker knew no such step ("step must have exactly one of action, run,
# sql, sleep, approval") nor flag.
source "$(dirname "$0")/lib.sh"
e2e_cluster 56140
HPORT=56141
python3 -B "$E2E_ROOT/test/e2e/http-step-server.py" "$HPORT" "$E2E_DIR/requests" >"$E2E_DIR/server.log" 2>&1 &
E2E_PIDS+=("$!")
wait_for 10 python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$HPORT/api/text')" \
  || fail "the test server did not start"
BASE=http://127.0.0.1:$HPORT
TOKEN=tok-$RANDOM$RANDOM
mkdir -p "$E2E_DIR/secrets"
printf '%s\n' "$TOKEN" >"$E2E_DIR/secrets/TOKEN"
# https: a private CA and a certificate for the name localhost (not the address)
TPORT=56143
TBASE=https://localhost:$TPORT
(cd "$E2E_DIR" &&
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=e2e-ca 2>/dev/null &&
  openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=localhost 2>/dev/null &&
  printf 'subjectAltName=DNS:localhost\n' >srv.ext &&
  openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile srv.ext 2>/dev/null) \
  || fail "the test certificates could not be made"
python3 -B "$E2E_ROOT/test/e2e/http-step-server.py" "$TPORT" "$E2E_DIR/requests" "$E2E_DIR/srv.pem" "$E2E_DIR/srv.key" \
  >"$E2E_DIR/tls-server.log" 2>&1 &
E2E_PIDS+=("$!")
wait_for 10 python3 -c "import ssl, urllib.request as u; u.urlopen('$TBASE/api/text', context=ssl.create_default_context(cafile='$E2E_DIR/ca.pem'))" \
  || fail "the test https server did not start: $(cat "$E2E_DIR/tls-server.log")"
sql "SELECT bgexec.configure_queue('q', retry_base => '100 ms', retry_cap => '1 s')" >/dev/null
start_worker w --queue q --allow-http "$BASE/api" --allow-http "$TBASE/api" --allow-http "https://127.0.0.1:$TPORT/api" \
  --http-ca-file "$E2E_DIR/ca.pem" --secrets-dir "$E2E_DIR/secrets"
start_worker plain --queue bare --allow-http "$TBASE/api"
wait_for 20 grep -q 'msg=listening' "$E2E_DIR/w.log" || fail "the worker did not start"
submit() {  # submit QUEUE ATTEMPTS STEPS-JSON [INPUT-JSON]
  sql "SELECT bgexec.submit('workflow', jsonb_build_object('steps', '$3'::jsonb, 'input', '${4:-null}'::jsonb), queue => '$1', max_attempts => $2)"
}
err() { sql "SELECT error->>'$2' FROM bgexec.job WHERE id = $1"; }
show() { sql "SELECT status, attempt, error FROM bgexec.job WHERE id = $1"; }

# 1. a 200 JSON reply feeding a later step; a secret in a header is sent and masked back
a=$(submit q 1 "[{\"id\": \"a\", \"http\": {\"url\": \"$BASE/api/json?x={{input.x}}\", \"method\": \"POST\",
      \"headers\": {\"X-Token\": \"{{secrets.TOKEN}}\"}, \"body\": {\"x\": \"{{input.x}}\"}, \"timeout\": \"10s\"}},
    {\"id\": \"b\", \"needs\": [\"a\"], \"http\": {\"url\": \"$BASE/api/json\", \"method\": \"PUT\",
      \"body\": \"n was {{steps.a.output.n}}\"}},
    {\"id\": \"t\", \"http\": {\"url\": \"$BASE/api/text\"}}]" '{"x": 7}')
wait_status "$a" completed 30
[[ $(sql "SELECT concat_ws('|', result->'b'->>'method', result->'b'->>'type', result->'b'->>'body', result->>'t')
          FROM bgexec.job WHERE id = $a") == 'PUT|text/plain; charset=utf-8|n was 41|plain words' ]] \
  || fail "the steps' outputs: $(sql "SELECT result FROM bgexec.job WHERE id = $a")"
[[ $(sql "SELECT concat_ws('|', data->'output'->>'method', data->'output'->>'type', data->'output'->'body'->>'x',
                 data->'output'->>'token')
          FROM bgexec.job_event WHERE job_id = $a AND kind = 'step_completed' AND data->>'step' = 'a'") \
   == 'POST|application/json|7|***' ]] \
  || fail "step a: $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $a AND kind = 'step_completed'")"
grep -q "^POST /api/json?x=7$" "$E2E_DIR/requests" || fail "requests: $(cat "$E2E_DIR/requests")"
if sql "SELECT data::text FROM bgexec.job_event WHERE job_id = $a" | grep -q "$TOKEN"; then fail "the secret was stored"; fi
if grep -q "$TOKEN" "$E2E_DIR/w.log"; then fail "the secret reached the worker's log"; fi

# 2. a 503 with Retry-After: 3 is retried 3 s on (the queue's backoff is 1 s at most)
l=$(submit q 3 "[{\"id\": \"l\", \"http\": {\"url\": \"$BASE/api/limited\"}}]")
wait_status "$l" completed 60
[[ $(sql "SELECT concat_ws(' ', data->>'delay_ms', data->'error'->>'retry_after', data->'error'->>'http_status',
                          data->'error'->>'message')
          FROM bgexec.job_event WHERE job_id = $l AND kind = 'retry_scheduled'") == "3000 3 503 http 503 from $BASE/api/limited: busy, come back" ]] \
  || fail "retry after 3 s: $(sql "SELECT seq, kind, created_at, data FROM bgexec.job_event WHERE job_id = $l ORDER BY seq")"
[[ $(sql "SELECT attempt || ' ' || (extract(epoch FROM (SELECT max(created_at) FROM bgexec.job_event WHERE job_id = $l AND kind = 'started')
                                    - (SELECT created_at FROM bgexec.job_event WHERE job_id = $l AND kind = 'retry_scheduled')) >= 2.5)
          FROM bgexec.job WHERE id = $l") == '2 true' ]] \
  || fail "the second attempt came early: $(sql "SELECT seq, kind, created_at FROM bgexec.job_event WHERE job_id = $l ORDER BY seq")"

# 3. a 400 is not retried; its message names the status, the URL and the body's start
b=$(submit q 3 "[{\"id\": \"s\", \"http\": {\"url\": \"$BASE/api/bad?q=1\"}}]")
wait_status "$b" failed 30
[[ $(err "$b" message)/$(err "$b" retryable)/$(err "$b" http_status)/$(sql "SELECT attempt FROM bgexec.job WHERE id = $b") \
   == "http 400 from $BASE/api/bad: no such thing/false/400/1" ]] || fail "the 400: $(show "$b")"

# 4. a redirect fails the step, not followed, not retried
m=$(submit q 3 "[{\"id\": \"s\", \"http\": {\"url\": \"$BASE/api/moved\"}}]")
wait_status "$m" failed 30
[[ $(err "$m" message)/$(err "$m" retryable) \
   == "http 302 from $BASE/api/moved: redirects are not followed (Location: http://elsewhere.invalid/)/false" ]] \
  || fail "the redirect: $(show "$m")"

# 4b. a secret in the URL, echoed in a redirect's Location where its cut falls, is masked before the
#     cut (cut first, its first characters went unmasked into the error and the log: review rev-http)
lo=$(submit q 1 "[{\"id\": \"s\", \"http\": {\"url\": \"$BASE/api/loc?t={{secrets.TOKEN}}\"}}]")
wait_status "$lo" failed 30
[[ $(err "$lo" message) == *"?t=***"* && $(err "$lo" message) != *"${TOKEN:0:4}"* ]] || fail "the Location: $(show "$lo")"
if grep -q "${TOKEN:0:6}" "$E2E_DIR/w.log"; then fail "part of the secret reached the worker's log"; fi

# 4c. an interim 103 Early Hints is read past to the final 200 (it failed the step, not retried)
e=$(submit q 1 "[{\"id\": \"e\", \"http\": {\"url\": \"$BASE/api/early\"}}]")
wait_status "$e" completed 30
[[ $(sql "SELECT result->'e'->>'early' FROM bgexec.job WHERE id = $e") == true ]] || fail "the 103: $(show "$e")"

# 4d. a chunk-size line that never ends fails the step at once (the read buffer is bounded; it grew
#     to gigabytes until the step's timeout, here 20 s)
t0=$(date +%s.%N)
en=$(submit q 1 "[{\"id\": \"s\", \"http\": {\"url\": \"$BASE/api/endless\", \"timeout\": 20}}]")
wait_status "$en" failed 30
took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
[[ $(err "$en" message) == "http GET $BASE/api/endless failed: read: "* ]] || fail "the endless chunk line: $(show "$en")"
awk -v t="$took" 'BEGIN { exit !(t < 15) }' || fail "the endless chunk line took $took s: $(show "$en")"

# 4e. a header value with a control character other than a tab is refused (it was sent raw)
cc=$(submit q 1 "[{\"id\": \"s\", \"http\": {\"url\": \"$BASE/api/json\", \"headers\": {\"X-A\": \"a\\u0001b\"}}}]")
wait_status "$cc" failed 30
[[ $(err "$cc" message)/$(err "$cc" retryable) == "step s: http header X-A has a control character in its value/false" ]] \
  || fail "the control character: $(show "$cc")"

# 4g. a body past a step output's 16 MiB fails the step, not retried; the worker's own headers
#     (Host, Content-Length, Transfer-Encoding, Connection) are not the step's, in any case
hu=$(submit q 3 "[{\"id\": \"s\", \"http\": {\"url\": \"$BASE/api/huge\"}}]")
wait_status "$hu" failed 30
[[ $(err "$hu" message)/$(err "$hu" retryable)/$(sql "SELECT attempt FROM bgexec.job WHERE id = $hu") \
   == "http GET $BASE/api/huge: the response body is over 16777216 bytes, the most a step's output may be/false/1" ]] \
  || fail "the 17 MiB body: $(show "$hu")"
ho=$(submit q 1 "[{\"id\": \"s\", \"http\": {\"url\": \"$BASE/api/json\", \"headers\": {\"hOsT\": \"evil.example\"}}}]")
wait_status "$ho" failed 30
[[ $(err "$ho" message)/$(err "$ho" retryable) == "step s: http header hOsT is set by the worker, not the step/false" ]] \
  || fail "a Host header: $(show "$ho")"

# 4f. an http step holds one of the worker's --step-processes places while its request is in
#     flight: with one, two parallel steps call one at a time (nothing bounded them: review rev-http)
start_worker one --queue one --allow-http "$BASE/api" --step-processes 1
o1=$(submit one 1 "[{\"id\": \"a\", \"http\": {\"url\": \"$BASE/api/inflight\"}},
                    {\"id\": \"b\", \"http\": {\"url\": \"$BASE/api/inflight\"}}]")
wait_status "$o1" completed 30
[[ $(sql "SELECT concat_ws(' ', result->'a'->>'inflight', result->'b'->>'inflight') FROM bgexec.job WHERE id = $o1") == '1 1' ]] \
  || fail "--step-processes 1: $(show "$o1") $(sql "SELECT result FROM bgexec.job WHERE id = $o1")"

# 5. URLs outside --allow-http, and a worker without it, are refused (not retried, the step named)
before=$(wc -l <"$E2E_DIR/requests")
for url in "$BASE/apix" "$BASE/" "http://127.0.0.1:$HPORT@localhost:$HPORT/api/json" "http://localhost:$HPORT/api/json" \
           "$BASE/api/../admin" "https://127.0.0.1:$HPORT/api/json" "http://localhost:$TPORT/api/json"; do
  o=$(submit q 3 "[{\"id\": \"out\", \"http\": {\"url\": \"$url\"}}]")
  wait_status "$o" failed 30
  [[ $(err "$o" message) == "step out: http url "* && $(err "$o" retryable) == false ]] || fail "$url: $(show "$o")"
done
[[ $(wc -l <"$E2E_DIR/requests") == "$before" ]] || fail "a refused URL was requested: $(tail -3 "$E2E_DIR/requests")"
start_worker none --queue none
p=$(submit none 3 "[{\"id\": \"p\", \"http\": {\"url\": \"$BASE/api/json\"}}]")
wait_status "$p" failed 30
[[ $(err "$p" message)/$(err "$p" retryable) \
   == "step p: http steps are refused by this worker (start it with --allow-http PREFIX)/false" ]] || fail "no flag: $(show "$p")"

# 5b. https: verified against --http-ca-file, by name; not by the system's store alone, nor for an address
#     the certificate does not name (a failure to connect: retryable)
h=$(submit q 1 "[{\"id\": \"h\", \"http\": {\"url\": \"$TBASE/api/json\", \"body\": [1]}}]")
wait_status "$h" completed 30
[[ $(sql "SELECT result->'h'->>'body' FROM bgexec.job WHERE id = $h") == '[1]' ]] || fail "https: $(show "$h")"
v=$(submit bare 1 "[{\"id\": \"v\", \"http\": {\"url\": \"$TBASE/api/json\"}}]")
wait_status "$v" failed 30
[[ $(err "$v" message)/$(err "$v" retryable) == "http GET $TBASE/api/json failed: tls handshake: certificate verify failed"*/true ]] \
  || fail "https without the CA: $(show "$v")"
# a CA file that cannot be read: said at the worker's start, and by the https step it fails
start_worker badca --queue badca --allow-http "$TBASE/api" --http-ca-file "$E2E_DIR/missing.pem"
wait_for 20 grep -q 'msg="https steps cannot verify their servers: they fail until --http-ca-file can be read"' \
  "$E2E_DIR/badca.log" || fail "no warning of the CA file: $(cat "$E2E_DIR/badca.log")"
c=$(submit badca 1 "[{\"id\": \"c\", \"http\": {\"url\": \"$TBASE/api/json\"}}]")
wait_status "$c" failed 30
[[ $(err "$c" message) == "http GET $TBASE/api/json failed: tls: --http-ca-file $E2E_DIR/missing.pem cannot be loaded: "* ]] \
  || fail "the missing CA file: $(show "$c")"
i=$(submit q 1 "[{\"id\": \"i\", \"http\": {\"url\": \"https://127.0.0.1:$TPORT/api/json\"}}]")
wait_status "$i" failed 30
[[ $(err "$i" message) == *"tls handshake: certificate verify failed"* ]] || fail "https by address: $(show "$i")"

# 6. a slow server: the step's http timeout ends it (retryable; one attempt here)
t0=$(date +%s.%N)
s=$(submit q 1 "[{\"id\": \"s\", \"http\": {\"url\": \"$BASE/api/slow\", \"timeout\": 1}}]")
wait_status "$s" failed 30
[[ $(err "$s" message)/$(err "$s" retryable) == "http GET $BASE/api/slow timed out after 1 s/true" ]] || fail "timeout: $(show "$s")"
took=$(sql "SELECT extract(epoch FROM finished_at - started_at) FROM bgexec.job WHERE id = $s")
awk -v t="$took" 'BEGIN { exit !(t >= 0.9 && t < 10) }' || fail "the timeout took $took s"

# the step's own timeout ends a request too, as it ends any step (step_timeout)
st=$(submit q 1 "[{\"id\": \"s\", \"timeout\": 1, \"http\": {\"url\": \"$BASE/api/slow\", \"timeout\": 300}}]")
wait_status "$st" failed 30
[[ $(err "$st" message)/$(err "$st" reason)/$(err "$st" retryable) == "step s timed out after 1 s/step_timeout/true" ]] \
  || fail "the step's timeout: $(show "$st")"

# 7. a stop mid-request ends it promptly
n0=$(grep -c "^GET /api/slow" "$E2E_DIR/requests")
x=$(submit q 1 "[{\"id\": \"s\", \"http\": {\"url\": \"$BASE/api/slow\", \"timeout\": 300}}]")
slow_seen() { (($(grep -c "^GET /api/slow" "$E2E_DIR/requests") > n0)); }
wait_for 30 slow_seen || fail "the request was not made"
t0=$(date +%s.%N)
"$BGEXEC" stop "$x" >/dev/null || fail "stop"
wait_status "$x" cancelled 30
took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
awk -v t="$took" 'BEGIN { exit !(t < 10) }' || fail "the stop took $took s"
[[ $(sql "SELECT data->'error'->>'reason' FROM bgexec.job_event WHERE job_id = $x AND kind = 'step_failed'") == stopped ]] \
  || fail "the stop's step event: $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $x AND kind = 'step_failed'")"
kill -0 "$PID_w" || fail "the worker died"
ok "200 fed a later step (secret header masked), 503+Retry-After retried 3 s on, 400 and 302 not retried, outside URLs refused, https verified (CA file, name), timeout and stop ended the request"

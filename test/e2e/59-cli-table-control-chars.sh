#!/usr/bin/env bash
# bgexec workers and bgexec schedules keep each row on its line and send no
# control byte to the terminal: a byte below 0x20, DEL or a C1 control in
# any cell (a worker id registered with ESC and a newline, a schedule's
# last_error) is a blank, as in bgexec jobs' error column.  And what a job
# made (its output lines, its error) reaches the terminal from tail, status
# and submit --wait with each control but tab and newline escaped: raw, an
# action's ESC [2J cleared the user's screen and a CR hid a line's start.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57977

sql "SELECT bgexec.register_worker(E'w\\x1b[2J\\nx\\ty\\x7f\\u009b1m', '{c}', 1, '{}')" >/dev/null
out=$("$BGEXEC" workers) || fail "workers: exit $?"
[[ $(wc -l <<<"$out") == 2 ]] || fail "workers: not one line per worker: $(od -c <<<"$out" | head -20)"
[[ $out != *$'\x1b'* ]] || fail "workers: an ESC reaches the terminal: $(od -c <<<"$out" | head -20)"
[[ $(tail -1 <<<"$out" | cut -f1) == 'w [2J x y  1m' ]] || fail "workers: the id cell: $(tail -1 <<<"$out" | od -c | head)"
[[ $(tail -1 <<<"$out" | awk -F'\t' '{print NF}') == 10 ]] || fail "workers: the row's columns: $(tail -1 <<<"$out")"
# --json keeps the id as it is (escaped by JSON)
[[ $("$BGEXEC" workers --json) == *'"id":"w\u001b[2J\nx\ty'$'\x7f\u009b''1m"'* ]] || fail "workers --json: $("$BGEXEC" workers --json)"

"$BGEXEC" schedule nightly '@daily' noop >/dev/null || fail "schedule: exit $?"
sql "UPDATE bgexec.schedule SET last_error = E'not fired:\\nlock\\x1b]0;title\\x07 held' WHERE name = 'nightly'" >/dev/null
out=$("$BGEXEC" schedules) || fail "schedules: exit $?"
[[ $(wc -l <<<"$out") == 2 ]] || fail "schedules: not one line per schedule: $(od -c <<<"$out" | head -20)"
[[ $(tail -1 <<<"$out" | cut -f10) == 'not fired: lock ]0;title  held' ]] \
  || fail "schedules: the last_error cell: $(tail -1 <<<"$out" | od -c | head -20)"

# A job that logged and failed with controls, written as a worker would.
id=$(sql "SELECT bgexec.submit('noop', '{}', queue => 'cc', idempotency_key => 'cc1')")
lease=$(sql "SELECT lease FROM bgexec.claim('w', '{cc}', 1)")
sql "SELECT bgexec.append_event($id, $lease, 'log', jsonb_build_object('step', 's', 'stream', 'stderr',
       'lines', jsonb_build_array(E'secret\\rok', E'\\x1b[2J\\x1b[Hcleared', E'crlf\\r', E'tab\\tkept')))" >/dev/null
sql "SELECT bgexec.finish($id, $lease, 'failed', jsonb_build_object('message', E'boom \\x1b]0;pwned\\x07 \\u009b31m'))" >/dev/null
rc=0; "$BGEXEC" tail "$id" >"$E2E_DIR/tail" 2>&1 || rc=$?
[[ $rc == 1 ]] || fail "tail of a failed job: exit $rc: $(cat "$E2E_DIR/tail")"
! grep -q $'[\x01-\x08\x0b-\x1f\x7f]\|\xc2[\x80-\x9f]' "$E2E_DIR/tail" \
  || fail "tail: a control reaches the terminal: $(od -c "$E2E_DIR/tail" | head -30)"
grep -qxF '  s|stderr| secret\rok' "$E2E_DIR/tail" || fail "tail: the CR line: $(cat "$E2E_DIR/tail")"
grep -qxF '  s|stderr| \x1b[2J\x1b[Hcleared' "$E2E_DIR/tail" || fail "tail: the ESC line: $(cat "$E2E_DIR/tail")"
grep -qxF '  s|stderr| crlf' "$E2E_DIR/tail" || fail "tail: a CRLF line's CR is its end: $(cat "$E2E_DIR/tail")"
grep -qx $'  s|stderr| tab\tkept' "$E2E_DIR/tail" || fail "tail: a tab is kept: $(cat "$E2E_DIR/tail")"
grep -qF 'failed: "boom \u001b]0;pwned\u0007 \u009b31m"' "$E2E_DIR/tail" || fail "tail: the error: $(cat "$E2E_DIR/tail")"
# --json keeps the data as stored (JSON escapes)
out=$("$BGEXEC" tail "$id" --json) || true
[[ $out == *'"secret\rok"'* ]] || fail "tail --json: $out"
rc=0; "$BGEXEC" status "$id" >"$E2E_DIR/status" 2>&1 || rc=$?
[[ $rc == 1 ]] || fail "status of a failed job: exit $rc: $(cat "$E2E_DIR/status")"
! grep -q $'[\x01-\x08\x0b-\x1f\x7f]\|\xc2[\x80-\x9f]' "$E2E_DIR/status" \
  || fail "status: a control reaches the terminal: $(od -c "$E2E_DIR/status" | head -30)"
# submit --wait of the same key: the job's message on stderr, escaped
rc=0; "$BGEXEC" submit noop --queue cc --idempotency-key cc1 --wait >"$E2E_DIR/wait" 2>&1 || rc=$?
[[ $rc == 1 ]] || fail "submit --wait of a failed job: exit $rc: $(cat "$E2E_DIR/wait")"
grep -qxF "bgexec: job $id failed: boom \x1b]0;pwned\x07 \u009b31m" "$E2E_DIR/wait" \
  || fail "submit --wait: the message: $(od -c "$E2E_DIR/wait" | head -30)"
ok

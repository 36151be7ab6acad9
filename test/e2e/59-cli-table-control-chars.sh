#!/usr/bin/env bash
# bgexec workers and bgexec schedules keep each row on its line and send no
# control byte to the terminal: a byte below 0x20 in any cell (a worker id
# registered with ESC and a newline, a schedule's last_error) is a blank,
# as in bgexec jobs' error column.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57977

sql "SELECT bgexec.register_worker(E'w\\x1b[2J\\nx\\ty', '{c}', 1, '{}')" >/dev/null
out=$("$BGEXEC" workers) || fail "workers: exit $?"
[[ $(wc -l <<<"$out") == 2 ]] || fail "workers: not one line per worker: $(od -c <<<"$out" | head -20)"
[[ $out != *$'\x1b'* ]] || fail "workers: an ESC reaches the terminal: $(od -c <<<"$out" | head -20)"
[[ $(tail -1 <<<"$out" | cut -f1) == 'w [2J x y' ]] || fail "workers: the id cell: $(tail -1 <<<"$out" | od -c | head)"
[[ $(tail -1 <<<"$out" | awk -F'\t' '{print NF}') == 10 ]] || fail "workers: the row's columns: $(tail -1 <<<"$out")"
# --json keeps the id as it is (escaped by JSON)
[[ $("$BGEXEC" workers --json) == *'"id":"w\u001b[2J\nx\ty"'* ]] || fail "workers --json: $("$BGEXEC" workers --json)"

"$BGEXEC" schedule nightly '@daily' noop >/dev/null || fail "schedule: exit $?"
sql "UPDATE bgexec.schedule SET last_error = E'not fired:\\nlock\\x1b]0;title\\x07 held' WHERE name = 'nightly'" >/dev/null
out=$("$BGEXEC" schedules) || fail "schedules: exit $?"
[[ $(wc -l <<<"$out") == 2 ]] || fail "schedules: not one line per schedule: $(od -c <<<"$out" | head -20)"
[[ $(tail -1 <<<"$out" | cut -f10) == 'not fired: lock ]0;title  held' ]] \
  || fail "schedules: the last_error cell: $(tail -1 <<<"$out" | od -c | head -20)"
ok

#!/usr/bin/env bash
# bgexec tail without --from of an ended job whose event rows go past its
# last_seq (rows written around the API): the rows are shown and the job
# row's status decides the exit, not a usage error about a --from nobody
# gave.  A --from the user gives past last_seq is still refused, named as
# given.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57973

id=$("$BGEXEC" submit noop --queue nobody)
"$BGEXEC" stop "$id" >/dev/null
wait_status "$id" cancelled 5
last=$(sql "SELECT last_seq FROM bgexec.job WHERE id = $id")
sql "INSERT INTO bgexec.job_event (job_id, seq, kind, data)
     SELECT $id, $last + i, 'log', jsonb_build_object('step', 's', 'stream', 'stdout', 'lines', jsonb_build_array('extra ' || i))
     FROM generate_series(1, 2) i" >/dev/null

set +e; timeout 10 "$BGEXEC" tail "$id" >"$E2E_DIR/out" 2>"$E2E_DIR/err"; rc=$?; set -e
((rc == 1)) && [[ ! -s $E2E_DIR/err ]] || fail "tail of a cancelled job with rows past last_seq: exit $rc (expected 1), $(cat "$E2E_DIR/err")"
grep -qx '  s|stdout| extra 2' "$E2E_DIR/out" || fail "tail did not show the rows past last_seq: $(cat "$E2E_DIR/out")"
set +e; timeout 10 "$BGEXEC" tail "$id" --from "$last" >/dev/null 2>"$E2E_DIR/err"; rc=$?; set -e
((rc == 1)) && [[ ! -s $E2E_DIR/err ]] || fail "tail --from last_seq: exit $rc (expected 1), $(cat "$E2E_DIR/err")"
# the user's cursor past last_seq: refused, as given
set +e; timeout 10 "$BGEXEC" tail "$id" --from $((last + 1)) >/dev/null 2>"$E2E_DIR/err"; rc=$?; set -e
((rc == 2)) && [[ $(cat "$E2E_DIR/err") == "bgexec tail: --from $((last + 1)) is past job $id's last event ($last)" ]] \
  || fail "tail --from past last_seq: exit $rc, $(cat "$E2E_DIR/err")"

# a long log is read a page (1000 events) at a time, each event once, in
# order, to the end (it was read in one result, held whole in memory)
long=$(sql "SELECT bgexec.submit('noop', queue => 'long')")
sql "SELECT bgexec.append_events(c.job_id, c.lease, (SELECT jsonb_agg(jsonb_build_object('kind', 'log',
       'data', jsonb_build_object('line', g))) FROM generate_series(1, 2500) g)) FROM bgexec.claim('wl', '{long}', 1) c" >/dev/null
sql "SELECT bgexec.finish(id, lease, 'completed') FROM bgexec.job WHERE id = $long" >/dev/null
timeout 20 "$BGEXEC" tail "$long" --json >"$E2E_DIR/long" || fail "tail of a long log"
[[ $(jq -s 'map(.seq) == [range(1; 2503)]' "$E2E_DIR/long") == true ]] \
  || fail "tail of 2502 events: $(wc -l <"$E2E_DIR/long") lines, $(jq -s 'map(.seq) | .[0:3], .[-3:]' -c "$E2E_DIR/long")"
ok

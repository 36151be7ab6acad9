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

# An old terminal event last on a full page (a failed attempt at seq 1000,
# retried, running again) is not the log's end: tail follows on to the
# events after it (it exited 1, "failed"; with the event at seq 999 it
# followed on).
sql "SELECT bgexec.register_worker('wb', '{edge}', 10)" >/dev/null
edge=$(sql "SELECT bgexec.submit('noop', queue => 'edge')")
lease=$(sql "SELECT lease FROM bgexec.claim('wb', '{edge}', 1, '1 hour')")
sql "SELECT bgexec.append_events($edge, $lease, (SELECT jsonb_agg(jsonb_build_object('kind', 'log',
       'data', jsonb_build_object('line', g))) FROM generate_series(1, 998) g))" >/dev/null
sql "SELECT bgexec.finish($edge, $lease, 'failed', '{\"message\": \"boom\"}')" >/dev/null
[[ $(sql "SELECT seq FROM bgexec.job_event WHERE job_id = $edge AND kind = 'failed'") == 1000 ]] \
  || fail "the failed event is not at seq 1000"
sql "SELECT bgexec.retry($edge)" >/dev/null
lease=$(sql "SELECT lease FROM bgexec.claim('wb', '{edge}', 1, '1 hour')")
set +e; timeout 5 "$BGEXEC" tail "$edge" --json >"$E2E_DIR/edge" 2>"$E2E_DIR/err"; rc=$?; set -e
((rc == 124)) || fail "tail of a job running again after a failed event at seq 1000: exit $rc (expected to follow on): $(cat "$E2E_DIR/err")"
[[ $(jq -s '.[-1].kind' "$E2E_DIR/edge") == '"started"' ]] || fail "tail stopped at: $(tail -1 "$E2E_DIR/edge" | cut -c1-200)"

# A page is cut by size too: 60 step outputs of a megabyte each, tail holds
# a few at a time (it held the page whole: 60 MB and more).
big=$(sql "SELECT bgexec.submit('noop', queue => 'big')")
sql "SELECT bgexec.register_worker('wc', '{big}', 10)" >/dev/null
lease=$(sql "SELECT lease FROM bgexec.claim('wc', '{big}', 1, '1 hour')")
for i in 1 2 3 4 5 6; do
  sql "SELECT bgexec.append_events($big, $lease, (SELECT jsonb_agg(jsonb_build_object('kind', 'step_completed',
         'data', jsonb_build_object('step', 's' || g, 'output', repeat('x', 1000000)))) FROM generate_series(1, 10) g))" >/dev/null
done
sql "SELECT bgexec.finish($big, $lease, 'completed')" >/dev/null
peak=$(python3 -c 'import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$BGEXEC" tail "$big")
[[ ${peak% *} == 0 ]] || fail "tail of the big log: exit ${peak% *}"
((${peak#* } < 40000)) || fail "tail of 60 MB of outputs peaked at ${peak#* } KiB"
ok

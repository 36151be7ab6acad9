#!/usr/bin/env bash
# `bgexec tail` (and submit --wait/--follow, which follow the same way)
# goes on across a PostgreSQL restart: it reconnects and resumes from its
# cursor, every event once and in order, and exits with the job's outcome.
# It exited 3 at the first lost connection, in the middle of a failover.
# A session the server ends (pg_terminate_backend) is lost alike, and the
# follow LISTENs again: it reconnected without a word or a LISTEN, and went
# on at the 1 s poll.  A connection never opened is no lost one: exit 3.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57932
rc=0; timeout 20 "$BGEXEC" tail 1 --db "user=bgexec_nobody" 2>"$E2E_DIR/nobody.err" || rc=$?
((rc == 3)) || fail "tail as a role that does not exist exited $rc (3 expected): $(cat "$E2E_DIR/nobody.err")"
start_worker w1 --allow-run --lease 30  # the job outlives the restart
id=$("$BGEXEC" submit workflow '{"steps": [
  {"id": "a", "run": ["sh", "-c", "for i in 1 2 3 4 5 6; do echo tick $i; sleep 1; done"]},
  {"id": "b", "needs": ["a"], "run": ["echo", "done"]}]}') || fail submit
"$BGEXEC" tail "$id" --json >"$E2E_DIR/tail.out" 2>"$E2E_DIR/tail.err" &
tail_pid=$!
E2E_PIDS+=("$tail_pid")
wait_for 20 grep -q '"kind":"step_started"' "$E2E_DIR/tail.out" || fail "tail shows nothing: $(cat "$E2E_DIR/tail.err")"
sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'bgexec tail client'" >/dev/null
wait_for 20 grep -q "reconnected" "$E2E_DIR/tail.err" \
  || fail "a session the server ended went unnoticed: $(cat "$E2E_DIR/tail.err")"
cluster_restart "$E2E_DIR/pg" >/dev/null || fail restart
wait_for 60 gone "$tail_pid" || fail "tail did not end: $(cat "$E2E_DIR/tail.err")"
rc=0; wait "$tail_pid" || rc=$?
((rc == 0)) || fail "tail exited $rc: $(cat "$E2E_DIR/tail.err")"
(($(grep -c "connection lost" "$E2E_DIR/tail.err") == 2)) || fail "the restart went unnoticed: the test tested nothing"
seqs=$(sed -n 's/.*"seq":\([0-9]*\).*/\1/p' "$E2E_DIR/tail.out" | tr '\n' ' ')
want=$(sql "SELECT string_agg(seq::text, ' ' ORDER BY seq) || ' ' FROM bgexec.job_event WHERE job_id = $id")
[[ $seqs == "$want" ]] || fail "tail printed seqs '$seqs', the job has '$want'"
status_is "$id" completed || fail "job is $(job_status "$id")"
ok "tail reconnected after the restart and printed events $want each once"

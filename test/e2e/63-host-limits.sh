#!/usr/bin/env bash
# The host's limits and files are the host's, not the job's: a worker short
# of descriptors, a FIFO in the secrets directory, a config path that is no
# file.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57964

# 1. The worker raises its soft open-file limit to the hard one: with a
# soft 64 and 40 slots of steps (two pipes each), steps failed with EMFILE.
steps='{"steps": [{"id": "s", "run": ["sleep", "1"]}]}'
submit_many() {  # N: N workflow jobs, max_attempts $2
  local n=$1 attempts=$2
  sql "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'workflow',
         'max_attempts', $attempts, 'payload', '$steps'::jsonb)) FROM generate_series(1, $n)))" >/dev/null
}
all_completed() {  # N SECONDS WHAT: the N jobs end within SECONDS, every one completed
  local n=$1 secs=$2 what=$3
  wait_for "$secs" sh -c "[ \"\$(psql -qXAt -c \"SELECT count(*) FROM bgexec.job WHERE finished_at IS NOT NULL\")\" = $n ]" \
    || fail "the $n jobs did not end: $(sql "SELECT status, count(*) FROM bgexec.job GROUP BY 1")"
  [[ $(sql "SELECT count(*) FROM bgexec.job WHERE status = 'completed'") == "$n" ]] \
    || fail "$what: $(sql "SELECT status, error->>'message', count(*) FROM bgexec.job GROUP BY 1, 2")"
}
(ulimit -Sn 64; exec "$BGEXEC" worker --id soft --lease 5 --allow-run --concurrency 40 >>"$E2E_DIR/soft.log" 2>&1) &
E2E_PIDS+=($!); soft=$!
submit_many 40 1
all_completed 40 60 "with a soft limit of 64"
grep -q "^Max open files *$(ulimit -Hn) " "/proc/$soft/limits" || fail "soft limit not raised: $(grep 'open files' /proc/$soft/limits)"
kill "$soft"; wait_for 20 gone "$soft" || fail "worker did not stop"
sql "DELETE FROM bgexec.job" >/dev/null

# 2. Where the hard limit itself is short, a step that cannot start for want
# of descriptors is retried (the host's state, not the step's): every such
# error was final, and retry-safe jobs failed at their first attempt.  (One
# whose attempt started nothing yet now goes back uncounted and the worker
# pauses its claims: 105-host-cannot-spawn; --step-processes keeps this
# worker from meeting EMFILE at all, most runs.)
(ulimit -n 48; exec "$BGEXEC" worker --id hard --lease 5 --allow-run --concurrency 30 >>"$E2E_DIR/hard.log" 2>&1) &
E2E_PIDS+=($!); hard=$!
submit_many 30 20
all_completed 30 120 "with a hard limit of 48"
grep -q 'open-file limit is low for the concurrency' "$E2E_DIR/hard.log" || fail "no warning of the low limit"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE kind = 'step_failed' AND data->'error'->>'message' LIKE '%Too many open files%'") -gt 0 ]] \
  || echo "note: no step met EMFILE this run (nothing to retry)"
kill "$hard"; wait_for 20 gone "$hard" || fail "worker did not stop"
sql "DELETE FROM bgexec.job" >/dev/null

# 3. A FIFO in the secrets directory fails the step that names it, at once;
# it held the worker's event loop in open(), and every job lost its lease.
mkdir -p "$E2E_DIR/secrets"; mkfifo "$E2E_DIR/secrets/PIPE"; printf 'fine\n' >"$E2E_DIR/secrets/OK"
start_worker fifo --allow-run --secrets-dir "$E2E_DIR/secrets"
slow=$("$BGEXEC" submit workflow '{"steps": [{"id": "s", "run": ["sleep", "4"]}]}')
sleep 1
pipe=$("$BGEXEC" submit workflow '{"steps": [{"id": "s", "run": ["echo", "{{secrets.PIPE}}"]}]}')
ok=$("$BGEXEC" submit workflow '{"steps": [{"id": "s", "run": ["echo", "{{secrets.OK}}"]}]}')
wait_status "$pipe" failed 15
wait_status "$ok" completed 15
wait_status "$slow" completed 20
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $pipe") == *"secret PIPE is not available"* ]] \
  || fail "FIFO secret: $(sql "SELECT error FROM bgexec.job WHERE id = $pipe")"
grep -q 'secret file not read: not a regular file' "$E2E_DIR/fifo.log" || fail "no warning of the FIFO"

# 4. --config names the OS's reason, and reads no device
out=$("$BGEXEC" worker --config /dev/zero 2>&1) && fail "--config /dev/zero was taken"
[[ $out == *"config file /dev/zero: not a regular file"* ]] || fail "--config /dev/zero: $out"
out=$("$BGEXEC" worker --config "$E2E_DIR/none.json" 2>&1) && fail "a missing config was taken"
[[ $out == *"none.json: No such file or directory"* ]] || fail "missing config: $out"
ok

#!/usr/bin/env bash
# The CLI checks its output: a reader gone (EPIPE) ends a command quietly
# with 141, as a shell reports SIGPIPE, at once even while tail waits for
# events; any other write error (/dev/full) is `cannot write output:
# REASON`, exit 6, and a submit whose id was lost names the job.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57978

# A running job with events and no end: claimed by hand, its log appended.
sql "SELECT bgexec.register_worker('t', '{c}', 1, '{}')" >/dev/null
id=$(sql "SELECT bgexec.submit('noop', '{}', 'c')")
lease=$(sql "SELECT lease FROM bgexec.claim('t', '{c}', 1, '1 hour')")
sql "SELECT bgexec.append_events($id, $lease, (SELECT jsonb_agg(jsonb_build_object('kind', 'log',
  'data', jsonb_build_object('step', 's', 'stream', 'stdout', 'lines', jsonb_build_array('line ' || i))))
  FROM generate_series(1, 5) i))" >/dev/null

# tail | head -1: head has its line and goes; tail follows no more.
for mode in "" --json; do
  start=$SECONDS
  set +e
  timeout 20 "$BGEXEC" tail "$id" $mode 2>"$E2E_DIR/err" | head -1 >"$E2E_DIR/out"
  rc=${PIPESTATUS[0]}
  set -e
  ((rc == 141)) || fail "tail $mode | head -1: exit $rc (expected 141), after $((SECONDS - start)) s: $(cat "$E2E_DIR/err")"
  ((SECONDS - start < 10)) || fail "tail $mode | head -1 took $((SECONDS - start)) s"
  [[ ! -s $E2E_DIR/err ]] || fail "tail $mode | head -1 wrote to stderr: $(cat "$E2E_DIR/err")"
  [[ -s $E2E_DIR/out ]] || fail "tail $mode | head -1 printed nothing"
done
# submit --wait | true: --wait prints only at the job's end, and waited
# out the whole job (here for ever: nothing claims it) for a reader gone.
start=$SECONDS
set +e
timeout 20 "$BGEXEC" submit noop --queue c --wait 2>"$E2E_DIR/err" | true
rc=${PIPESTATUS[0]}
set -e
((rc == 141)) || fail "submit --wait | true: exit $rc (expected 141), after $((SECONDS - start)) s: $(cat "$E2E_DIR/err")"
((SECONDS - start < 10)) || fail "submit --wait | true took $((SECONDS - start)) s"
[[ ! -s $E2E_DIR/err ]] || fail "submit --wait | true wrote to stderr: $(cat "$E2E_DIR/err")"
# A reader gone before a command's output (a pipe whose read end is
# closed before the command starts): the same, quietly.
closed_pipe() {
  python3 -c 'import os, sys; r, w = os.pipe(); os.close(r); os.dup2(w, 1); os.execv(sys.argv[1], sys.argv[1:])' "$@"
}
for args in jobs "status $id" workers "submit noop --json" version --help "worker --help" "serve --help" \
  "bench --help" "jobs --help"; do
  set +e; closed_pipe "$BGEXEC" $args 2>"$E2E_DIR/err"; rc=$?; set -e
  ((rc == 141)) && [[ ! -s $E2E_DIR/err ]] || fail "$args to a closed pipe: exit $rc, stderr $(cat "$E2E_DIR/err")"
done

# expect_full NEEDLE ARGS...: exit 6 and the message, stdout on /dev/full.
expect_full() {
  local needle=$1 rc; shift
  set +e; timeout 20 "$BGEXEC" "$@" >/dev/full 2>"$E2E_DIR/err"; rc=$?; set -e
  ((rc == 6)) || fail "bgexec $* > /dev/full: exit $rc (expected 6): $(cat "$E2E_DIR/err")"
  [[ $(cat "$E2E_DIR/err") =~ ^$needle$ ]] || fail "bgexec $* > /dev/full: stderr $(cat "$E2E_DIR/err")"
}
expect_full 'bgexec jobs: cannot write output: No space left on device' jobs
# version, the usage and every --help alike (they exited 0).
expect_full 'bgexec version: cannot write output: No space left on device' version
expect_full 'bgexec: cannot write output: No space left on device' --help
expect_full 'bgexec worker: cannot write output: No space left on device' worker --help
expect_full 'bgexec serve: cannot write output: No space left on device' serve --help
expect_full 'bgexec bench: cannot write output: No space left on device' bench --help
expect_full 'bgexec submit: cannot write output: No space left on device' submit --help
expect_full 'bgexec status: cannot write output: No space left on device' status "$id"
expect_full 'bgexec workers: cannot write output: No space left on device' workers
expect_full 'bgexec queues: cannot write output: No space left on device' queues --json
expect_full 'bgexec tail: cannot write output: No space left on device' tail "$id"
# submit: the job is queued, its id lost: named on stderr.  --follow stops
# there, not following a job it cannot show.
next=$(($(sql "SELECT max(id) FROM bgexec.job") + 1))
expect_full "bgexec submit: cannot write output: No space left on device \\(job $next was submitted\\)" submit noop --json
[[ $(job_status "$next") == queued ]] || fail "job $next: $(job_status "$next")"
next=$((next + 1))
expect_full "bgexec submit: cannot write output: No space left on device \\(job $next was submitted\\)" \
  submit noop --queue nobody --follow
# No command at all is a usage error, exit 2 whatever stdout is: the usage
# goes to stderr, as for an unknown command (it went to stdout, and to
# /dev/full the exit was 6).
for args in "" "nosuchcommand"; do
  set +e; "$BGEXEC" $args >/dev/full 2>"$E2E_DIR/err"; rc=$?; set -e
  ((rc == 2)) || fail "bgexec $args > /dev/full: exit $rc (expected 2): $(cat "$E2E_DIR/err")"
  grep -q '^usage: bgexec COMMAND' "$E2E_DIR/err" || fail "bgexec $args: no usage on stderr: $(cat "$E2E_DIR/err")"
done
# bench's results table: its printf calls failed unnoticed, exit 0.  Its
# progress notes go to stderr, the failure last.
set +e
timeout 120 "$BGEXEC" bench --jobs 20 --rounds 1 --workers 1 --concurrency 2 --pickup-jobs 3 --pickup-gap-ms 1 \
  --skip-reference --skip-rss >/dev/full 2>"$E2E_DIR/bench.err"
rc=$?
set -e
((rc == 6)) || fail "bench > /dev/full: exit $rc (expected 6): $(tail -3 "$E2E_DIR/bench.err")"
[[ $(tail -1 "$E2E_DIR/bench.err") == 'bgexec bench: cannot write output: No space left on device' ]] \
  || fail "bench > /dev/full: stderr ends $(tail -1 "$E2E_DIR/bench.err")"
# The worker logs on stderr and prints nothing: its stdout on /dev/full
# changes nothing (only the help texts check their writes).
"$BGEXEC" worker --id full --queue full >/dev/full 2>"$E2E_DIR/full.log" &
E2E_PIDS+=("$!")
fid=$(sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"s\", \"sleep\": 0}]}', 'full')")
wait_status "$fid" completed
# --wait prints the id only at the job's end: lost there, the error names
# the job as a plain submit's does (it exited 6 with no id anywhere).
"$BGEXEC" schedule full-sched '0 0 1 1 *' workflow '{"steps": [{"id": "s", "sleep": 0}]}' --queue full >/dev/null \
  || fail "schedule"
for args in "submit workflow {\"steps\":[{\"id\":\"s\",\"sleep\":0}]} --queue full --wait" \
  "submit workflow {\"steps\":[{\"id\":\"s\",\"sleep\":0}]} --queue full --wait --json" \
  "run-schedule full-sched --wait" "run-schedule full-sched --wait --json"; do
  cmd=${args%% *}
  # shellcheck disable=SC2086
  expect_full "bgexec $cmd: cannot write output: No space left on device \\(job [0-9]+ was submitted\\)" $args
  wid=$(grep -o 'job [0-9]* was submitted' "$E2E_DIR/err" | grep -o '[0-9]*')
  [[ $(job_status "$wid") == completed ]] || fail "$args: job $wid: $(job_status "$wid")"
done
ok

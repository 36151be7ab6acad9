#!/usr/bin/env bash
# Recurring jobs from the CLI, fired by a worker: with the in-server watchdog
# off (as without shared_preload_libraries), the worker's own reconcile()
# timer submits a due schedule's job, once per tick, as the schedule's
# owner, and runs it.  The CLI creates, lists, pauses, resumes, runs and
# deletes schedules, refuses a bad cron expression naming the field (its
# hint, not the server's call stack), and a bad --timeout as a usage error.
source "$(dirname "$0")/lib.sh"
[[ -x $BGEXEC ]] || fail "no binary at $BGEXEC (run scripts/build-daemon.sh)"
cluster_start "$E2E_DIR/pg" 57960 "$E2E_FSYNC" "bgexec.watchdog = off" >/dev/null || fail "cluster did not start"
sql "CREATE EXTENSION bgexec" >/dev/null
[[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'bgexec watchdog'") == 0 ]] \
  || fail "the watchdog runs"

# Yearly, so that no later tick comes due while the test counts jobs (an
# every-five-minutes one fired again, rightly, when the test ran across a
# multiple of five minutes).
out=$("$BGEXEC" schedule hello '0 0 1 1 *' workflow \
  '{"steps": [{"id": "s", "sql": "SELECT 42 AS answer"}]}' --queue sched --max-attempts 2 \
  --time-zone Asia/Kolkata --no-overlap) || fail "bgexec schedule: $out"
# midnight of 1 January on the clock of UTC+05:30 is 18:30 the day before in UTC
[[ $out =~ ^"schedule hello: next run "20[0-9][0-9]-12-31T18:30:00Z$ ]] || fail "bgexec schedule printed: $out"
"$BGEXEC" schedules | grep -q $'^hello\t0 0 1 1 \\*\tAsia/Kolkata\tworkflow\tsched\tfalse\t20[0-9][0-9]-12-31T18:30:00Z\t' \
  || fail "bgexec schedules (its next run in UTC, as schedule printed it): $("$BGEXEC" schedules)"
# yours only, as pause-schedule and the others act on yours only: a
# superuser reads every role's rows, and listed another's with no owner
psql -qX -c "CREATE ROLE e2e_other; GRANT bgexec_client TO e2e_other; SET ROLE e2e_other;
             SELECT bgexec.schedule('theirs', '@daily', 'noop', queue => 'sched')" >/dev/null || fail "another role's schedule"
! "$BGEXEC" schedules | grep -q '^theirs' || fail "bgexec schedules lists another role's schedule: $("$BGEXEC" schedules)"
sql "DELETE FROM bgexec.schedule WHERE name = 'theirs'" >/dev/null

set +e; "$BGEXEC" schedule bad '0 25 * * *' noop 2>"$E2E_DIR/err"; rc=$?; set -e
((rc == 3)) || fail "a bad cron: exit $rc"
grep -qF 'cron hour field "25" is not valid' "$E2E_DIR/err" || fail "a bad cron: $(cat "$E2E_DIR/err")"
grep -qF '  hint: five fields' "$E2E_DIR/err" || fail "a bad cron's hint: $(cat "$E2E_DIR/err")"
! grep -q 'CONTEXT\|PL/pgSQL' "$E2E_DIR/err" || fail "a database error prints the call stack: $(cat "$E2E_DIR/err")"
# a value the server cannot convert names the argument, as a usage error
set +e; "$BGEXEC" schedule bad '@daily' noop --timeout abc 2>"$E2E_DIR/err"; rc=$?; set -e
((rc == 2)) || fail "a bad --timeout: exit $rc (expected 2)"
grep -qF -- '--timeout: invalid input syntax for type interval: "abc"' "$E2E_DIR/err" \
  || fail "a bad --timeout: $(cat "$E2E_DIR/err")"

start_worker w1 --queue sched --poll 0.2 --reconcile-interval 0.5
# due ten minutes ago, so two ticks were missed: one job
sql "UPDATE bgexec.schedule SET next_run_at = now() - interval '10 minutes'" >/dev/null
fired() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = 'sched'") == 1 ]]; }
wait_for 20 fired || fail "the worker's reconcile did not fire the due schedule"
j=$(sql "SELECT id FROM bgexec.job WHERE queue = 'sched'")
wait_status "$j" completed 20
[[ $(sql "SELECT result->'s'->0->>'answer' FROM bgexec.job WHERE id = $j") == 42 ]] || fail "result"
[[ $(sql "SELECT owner || ' ' || max_attempts FROM bgexec.job WHERE id = $j") == "postgres 2" ]] || fail "job fields"
[[ $(sql "SELECT overlap FROM bgexec.schedule") == f ]] || fail "--no-overlap was not stored"
[[ $(sql "SELECT last_job_id = $j AND next_run_at > now() AND last_error IS NULL FROM bgexec.schedule") == t ]] \
  || fail "schedule row: $(sql "SELECT * FROM bgexec.schedule")"
sleep 1.5  # three more reconcile() calls
fired || fail "one tick fired more than one job"

# paused, a due tick fires nothing; resumed, it fires from its next run
out=$("$BGEXEC" pause-schedule hello) || fail "pause-schedule: $out"
[[ $out == "schedule hello: paused" ]] || fail "pause-schedule printed: $out"
"$BGEXEC" schedules | grep -q $'^hello\t.*\tsched\ttrue\t' || fail "schedules: $("$BGEXEC" schedules)"
sql "UPDATE bgexec.schedule SET next_run_at = now() - interval '1 minute'" >/dev/null
sleep 1.5  # three reconcile() calls
fired || fail "a paused schedule fired"
out=$("$BGEXEC" resume-schedule hello) || fail "resume-schedule: $out"
[[ $out =~ ^"schedule hello: resumed, next run "20[0-9][0-9]-12-31T18:30:00Z$ ]] \
  || fail "resume-schedule printed: $out"
[[ $(sql "SELECT NOT paused AND next_run_at > now() FROM bgexec.schedule") == t ]] || fail "not resumed"
# run-schedule: its job now, out of turn, waited for like submit --wait
out=$("$BGEXEC" run-schedule hello --wait) || fail "run-schedule --wait: $out"
[[ $out =~ ^[0-9]+" completed"$ ]] || fail "run-schedule --wait printed: $out"
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = 'sched'") == 2 ]] || fail "run-schedule: no second job"
for cmd in run-schedule pause-schedule resume-schedule unschedule; do
  set +e; "$BGEXEC" $cmd nope 2>"$E2E_DIR/err"; rc=$?; set -e
  ((rc == 4)) || fail "$cmd of no schedule: exit $rc (expected 4)"
  [[ $(cat "$E2E_DIR/err") == "bgexec $cmd: schedule nope not found" ]] || fail "$cmd of no schedule: $(cat "$E2E_DIR/err")"
  # a NAME that is not UTF-8 is the argument's fault, named (exit 2)
  set +e; "$BGEXEC" $cmd $'\xff' 2>"$E2E_DIR/err"; rc=$?; set -e
  ((rc == 2)) && [[ $(cat "$E2E_DIR/err") == "bgexec $cmd: NAME: invalid byte sequence for encoding \"UTF8\": 0xff" ]] \
    || fail "$cmd of a name that is not UTF-8: exit $rc, $(cat "$E2E_DIR/err")"
done

"$BGEXEC" unschedule hello >/dev/null || fail "unschedule"
set +e; "$BGEXEC" unschedule hello 2>/dev/null; rc=$?; set -e
((rc == 4)) || fail "unschedule of a deleted schedule: exit $rc (expected 4)"
ok

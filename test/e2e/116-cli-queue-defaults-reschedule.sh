#!/usr/bin/env bash
# configure-queue --default-max-attempts/--default-timeout, and reschedule:
# a job submitted by the CLI without --max-attempts or --timeout gets the
# queue's defaults (the CLI passes none: it passed 1, so no queue default
# could apply); --max-attempts 1 still means at most once, --timeout none
# no timeout.  reschedule moves
# a queued job's run_after or priority and prints when it runs; a job that
# is not queued is refused (exit 3, 55000, naming its status), and a call
# with nothing to change is a usage error.  tail shows the event.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57996

out=$("$BGEXEC" configure-queue idem --default-max-attempts 20 --default-timeout 10m 2>/dev/null) \
  || fail "configure-queue --default-*: exit $?"
[[ $out == *" default_max_attempts=20 default_timeout=00:10:00" ]] || fail "configure-queue printed: $out"
a=$("$BGEXEC" submit noop --queue idem --json | jq -r .id) || fail "submit: exit $?"
b=$("$BGEXEC" submit noop --queue idem --max-attempts 1 --timeout 5s --json | jq -r .id) || fail "submit --max-attempts 1"
c=$("$BGEXEC" submit noop --queue other --json | jq -r .id) || fail "submit to another queue"
[[ $(sql "SELECT string_agg(max_attempts || '/' || coalesce(timeout::text, '-'), ',' ORDER BY id) FROM bgexec.job WHERE id IN ($a, $b, $c)") \
   == "20/00:10:00,1/00:00:05,1/-" ]] \
  || fail "the jobs' max_attempts/timeout: $(sql "SELECT id, max_attempts, timeout FROM bgexec.job ORDER BY id")"
# --timeout none (or 0): no timeout, whatever the queue's default; a
# schedule's too, when it fires
n=$("$BGEXEC" submit noop --queue idem --timeout none --json | jq -r .id) || fail "submit --timeout none: exit $?"
z=$("$BGEXEC" submit noop --queue idem --timeout 0 --json | jq -r .id) || fail "submit --timeout 0: exit $?"
"$BGEXEC" schedule untimed '0 3 * * *' noop --queue idem --timeout none >/dev/null || fail "schedule --timeout none"
u=$("$BGEXEC" run-schedule untimed --json | jq -r .id) || fail "run-schedule untimed"
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE id IN ($n, $z, $u) AND timeout IS NULL") == 3 ]] \
  || fail "--timeout none/0: $(sql "SELECT id, timeout FROM bgexec.job WHERE id IN ($n, $z, $u)")"
# a schedule without --max-attempts takes the queue's default when it fires
"$BGEXEC" schedule tick '0 3 * * *' noop --queue idem >/dev/null || fail "schedule"
[[ $(sql "SELECT max_attempts IS NULL FROM bgexec.schedule WHERE name = 'tick'") == t ]] || fail "the schedule stored a max_attempts"
s=$("$BGEXEC" run-schedule tick --json | jq -r .id) || fail "run-schedule"
[[ $(sql "SELECT max_attempts FROM bgexec.job WHERE id = $s") == 20 ]] || fail "the schedule's job: $(sql "SELECT max_attempts FROM bgexec.job WHERE id = $s")"
expect() {  # expect RC MESSAGE ARGS...: the exit code and a line of stderr
  local want=$1 msg=$2; shift 2
  set +e; "$BGEXEC" "$@" >"$E2E_DIR/out" 2>"$E2E_DIR/err"; local rc=$?; set -e
  ((rc == want)) || fail "bgexec $*: exit $rc (expected $want): $(cat "$E2E_DIR/err")"
  grep -qF -- "$msg" "$E2E_DIR/err" || fail "bgexec $*: $(cat "$E2E_DIR/err")"
}
expect 2 '--default-max-attempts: expected an integer from 1 to 2147483647' configure-queue idem --default-max-attempts 0
expect 3 'default_timeout must be a positive interval of at most 100 years, or 0 to remove it (SQLSTATE 22023)' configure-queue idem --default-timeout '-1 min'
# --default-timeout none removes it (0 to configure_queue)
out=$("$BGEXEC" configure-queue idem --default-timeout none 2>/dev/null) || fail "--default-timeout none: exit $?"
[[ $out == *" default_max_attempts=20 default_timeout=none" ]] || fail "--default-timeout none printed: $out"

# reschedule: a job due tomorrow moved to now, then its priority
d=$("$BGEXEC" submit noop --queue later --run-after +1d --json | jq -r .id) || fail "submit --run-after +1d"
out=$("$BGEXEC" reschedule "$d" --run-after +0) || fail "reschedule --run-after +0: exit $?"
[[ $out =~ ^job\ $d:\ runs\ after\ 20[0-9-]+T[0-9:]+Z$ ]] || fail "reschedule printed: $out"
[[ $(sql "SELECT run_after <= now() FROM bgexec.job WHERE id = $d") == t ]] || fail "the job was not moved"
out=$("$BGEXEC" reschedule "$d" --priority 7 --json) || fail "reschedule --priority: exit $?"
[[ $(jq -r .id <<<"$out") == "$d" && $(sql "SELECT priority FROM bgexec.job WHERE id = $d") == 7 ]] \
  || fail "reschedule --priority: $out"
"$BGEXEC" stop "$d" >/dev/null
set +e; out=$("$BGEXEC" tail "$d"); rc=$?; set -e  # a cancelled job: exit 1
((rc == 1)) || fail "tail of the cancelled job: exit $rc"
grep -q "rescheduled by postgres: run_after .*Z, priority 7" <<<"$out" || fail "tail did not show the event: $out"
# refused: a cancelled job (55000 naming its status), nothing to change, a bad --priority
expect 3 "job $d is cancelled: only a queued job can be rescheduled (SQLSTATE 55000)" reschedule "$d" --priority 1
expect 2 'reschedule takes ID and --run-after, --priority or both' reschedule "$d"
expect 2 '--priority' reschedule "$d" --priority x
[[ $(sql "SELECT priority FROM bgexec.job WHERE id = $d") == 7 ]] || fail "a refused reschedule changed the job"
ok

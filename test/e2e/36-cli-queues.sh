#!/usr/bin/env bash
# bgexec pause-queue, resume-queue and configure-queue: an administrator
# stops a queue's jobs being claimed (a real worker waiting on it claims
# nothing while submits still queue), lets them run again (the waiting
# worker is woken, not left to its poll), sets and removes its caps and
# backoff; each prints the queue's settings.  Bad values are usage errors
# naming the option, or the database's error (exit 3) naming the
# constraint, and change nothing; a client role is refused.  bgexec queues
# lists the counts and the caps.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57975

settings() { sql "SELECT row(paused, max_queued, max_running, max_running_per_key, retry_base, retry_cap, rate_limit, rate_period) FROM bgexec.queue WHERE name = 'mail'"; }

out=$("$BGEXEC" pause-queue mail 2>"$E2E_DIR/err") || fail "pause-queue: exit $?"
[[ $out == "queue mail: paused=true max_queued=none max_running=none max_running_per_key=none retry_base=00:00:01 retry_cap=00:10:00 rate_limit=none rate_period=none default_max_attempts=none default_timeout=none" ]] \
  || fail "pause-queue printed: $out"
# A queue with no settings and no jobs is new (a typo, often): a note says
# so on stderr.  One the call before made, or one with jobs, is known.
[[ $(cat "$E2E_DIR/err") == "note: queue mail had no settings and no jobs: this call created it (bgexec queues lists the queues)" ]] \
  || fail "pause-queue of a new queue: stderr $(cat "$E2E_DIR/err")"
"$BGEXEC" pause-queue mail >/dev/null 2>"$E2E_DIR/err" && [[ ! -s $E2E_DIR/err ]] \
  || fail "pause-queue of a configured queue: stderr $(cat "$E2E_DIR/err")"
"$BGEXEC" submit noop --queue other >/dev/null
"$BGEXEC" resume-queue other --json >/dev/null 2>"$E2E_DIR/err" && [[ ! -s $E2E_DIR/err ]] \
  || fail "resume-queue of a queue with jobs: stderr $(cat "$E2E_DIR/err")"
# A worker that polls once a minute: only resume-queue's wake can start the
# jobs within the test's bounds.
start_worker w1 --queue mail --poll 60
ready() { [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%await_claim%' AND state = 'active'") -ge 1 ]]; }
wait_for 20 ready || fail "the worker does not wait on the queue"
ids=$(for i in 1 2 3; do "$BGEXEC" submit noop --queue mail; done) || fail "submit to a paused queue"
sleep 1.5
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = 'mail' AND status = 'queued'") == 3 ]] \
  || fail "a paused queue's jobs were claimed: $(sql "SELECT id, status FROM bgexec.job")"

out=$("$BGEXEC" resume-queue mail --json) || fail "resume-queue: exit $?"
[[ $out == '{"default_max_attempts":null,"default_timeout":null,"max_queued":null,"max_running":null,"max_running_per_key":null,"name":"mail","paused":false,"rate_limit":null,"rate_period":null,"retry_base":"00:00:01","retry_cap":"00:10:00"}' ]] \
  || fail "resume-queue --json printed: $out"
for id in $ids; do wait_status "$id" completed 20; done
# --wait on a queue a live worker claims from: no note.  On one no live
# worker has, or a paused one: a note on stderr, and the wait goes on.
out=$("$BGEXEC" submit noop --queue mail --wait 2>"$E2E_DIR/err") || fail "submit --wait: exit $?"
[[ $out == *" completed" && ! -s $E2E_DIR/err ]] || fail "submit --wait to mail: $out, stderr $(cat "$E2E_DIR/err")"
set +e; timeout 2 "$BGEXEC" submit noop --queue nobody --wait >/dev/null 2>"$E2E_DIR/err"; rc=$?; set -e
((rc == 124)) && grep -qE '^note: no live worker claims from queue nobody \(bgexec workers lists them\); waiting for job [0-9]+ anyway$' "$E2E_DIR/err" \
  || fail "submit --wait to a queue no worker has: exit $rc, stderr $(cat "$E2E_DIR/err")"
"$BGEXEC" pause-queue mail >/dev/null
set +e; timeout 2 "$BGEXEC" submit noop --queue mail --follow >/dev/null 2>"$E2E_DIR/err"; rc=$?; set -e
((rc == 124)) && grep -qE '^note: queue mail is paused \(bgexec resume-queue mail\); waiting for job [0-9]+ anyway$' "$E2E_DIR/err" \
  || fail "submit --follow to a paused queue: exit $rc, stderr $(cat "$E2E_DIR/err")"
# status and tail of that job note it as well
id=$(sql "SELECT max(id) FROM bgexec.job WHERE queue = 'mail'")
"$BGEXEC" status "$id" >/dev/null 2>"$E2E_DIR/err" || fail "status of a queued job: exit $?"
[[ $(cat "$E2E_DIR/err") == "note: queue mail is paused (bgexec resume-queue mail)" ]] \
  || fail "status of a job in a paused queue: stderr $(cat "$E2E_DIR/err")"
id=$(sql "SELECT max(id) FROM bgexec.job WHERE queue = 'mail'")
set +e; timeout 2 "$BGEXEC" tail "$id" >/dev/null 2>"$E2E_DIR/err"; rc=$?; set -e
((rc == 124)) && [[ $(cat "$E2E_DIR/err") == "note: queue mail is paused (bgexec resume-queue mail); waiting for job $id anyway" ]] \
  || fail "tail of a job in a paused queue: exit $rc, stderr $(cat "$E2E_DIR/err")"
"$BGEXEC" resume-queue mail >/dev/null
mail_done() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = 'mail' AND status <> 'completed'") == 0 ]]; }
wait_for 20 mail_done || fail "the paused queue's job did not run once resumed"

out=$("$BGEXEC" configure-queue mail --max-queued 1 --max-running 4 --max-running-per-key 2 \
  --retry-base 2s --retry-cap '1 hour') || fail "configure-queue: exit $?"
[[ $out == "queue mail: paused=false max_queued=1 max_running=4 max_running_per_key=2 retry_base=00:00:02 retry_cap=01:00:00 rate_limit=none rate_period=none default_max_attempts=none default_timeout=none" ]] \
  || fail "configure-queue printed: $out"
# the cap holds: one queued job, the second submit refused (53400)
"$BGEXEC" pause-queue mail >/dev/null
"$BGEXEC" submit noop --queue mail >/dev/null || fail "a submit under the cap"
set +e; "$BGEXEC" submit noop --queue mail 2>"$E2E_DIR/err"; rc=$?; set -e
((rc == 3)) && grep -qF '(SQLSTATE 53400)' "$E2E_DIR/err" || fail "a submit past max_queued: exit $rc, $(cat "$E2E_DIR/err")"
# none removes a cap, and leaves the others
out=$("$BGEXEC" configure-queue mail --max-queued none --max-running none) || fail "configure-queue none: exit $?"
[[ $out == "queue mail: paused=true max_queued=none max_running=none max_running_per_key=2 retry_base=00:00:02 retry_cap=01:00:00 rate_limit=none rate_period=none default_max_attempts=none default_timeout=none" ]] \
  || fail "configure-queue none printed: $out"
"$BGEXEC" submit noop --queue mail >/dev/null || fail "a submit once the cap is removed"
# a rate limit, its period, and none to remove it (the period is kept)
out=$("$BGEXEC" configure-queue mail --rate-limit 50 --rate-period 2s) || fail "configure-queue --rate-limit: exit $?"
[[ $out == "queue mail: paused=true max_queued=none max_running=none max_running_per_key=2 retry_base=00:00:02 retry_cap=01:00:00 rate_limit=50 rate_period=00:00:02 default_max_attempts=none default_timeout=none" ]] \
  || fail "configure-queue --rate-limit printed: $out"
out=$("$BGEXEC" queues) || fail "queues: exit $?"
grep -qP '^mail\ttrue\t2\t0\t0\t5\t0\t0\t0\t\d\d:\d\d:\d\d[.\d]*\t-\t-\t2\t1\t50\t00:00:02$' <<<"$out" || fail "queues' line with a rate limit: $out"
out=$("$BGEXEC" configure-queue mail --rate-limit none) || fail "configure-queue --rate-limit none: exit $?"
[[ $out == *" rate_limit=none rate_period=none default_max_attempts=none default_timeout=none" && $(sql "SELECT rate_period FROM bgexec.queue WHERE name = 'mail'") == 00:00:02 ]] \
  || fail "configure-queue --rate-limit none printed: $out"
# bgexec queues: counts, then the caps ("-": none), a column each
out=$("$BGEXEC" queues) || fail "queues: exit $?"
[[ $(head -1 <<<"$out") == $'queue\tpaused\tqueued\trunning\tsuspended\tcompleted\tfailed\tcancelled\ttimed_out\toldest_queued_age\tmax_queued\tmax_running\tmax_running_per_key\tworkers\trate_limit\trate_period' ]] \
  || fail "queues' header: $out"
grep -qP '^mail\ttrue\t2\t0\t0\t5\t0\t0\t0\t\d\d:\d\d:\d\d[.\d]*\t-\t-\t2\t1\t-\t-$' <<<"$out" || fail "queues' line: $out"

# Bad input: named, and nothing changes.
before=$(settings)
expect() {  # expect RC MESSAGE ARGS...: the exit code and a line of stderr
  local want=$1 msg=$2; shift 2
  set +e; "$BGEXEC" "$@" >"$E2E_DIR/out" 2>"$E2E_DIR/err"; local rc=$?; set -e
  ((rc == want)) || fail "bgexec $*: exit $rc (expected $want): $(cat "$E2E_DIR/err")"
  grep -qF -- "$msg" "$E2E_DIR/err" || fail "bgexec $*: $(cat "$E2E_DIR/err")"
  [[ ! -s $E2E_DIR/out ]] || fail "bgexec $* printed: $(cat "$E2E_DIR/out")"
}
expect 2 'configure-queue takes NAME and at least one of --max-queued' configure-queue mail
expect 2 '--max-running: expected none or an integer from 0 to 2147483647, got "-1"' configure-queue mail --max-running -1
expect 2 '--max-queued: expected none or an integer from 0 to 2147483647, got "99999999999"' configure-queue mail --max-queued 99999999999
expect 2 '--retry-base: invalid input syntax for type interval: "abc"' configure-queue mail --retry-base abc
expect 3 'retry_cap must be at least retry_base, got retry_cap 00:00:01 and retry_base 02:00:00 (SQLSTATE 23514)' configure-queue mail --retry-base 2h --retry-cap 1s
expect 2 '--rate-limit: expected none or an integer from 0 to 2147483647, got "-3"' configure-queue mail --rate-limit -3
expect 3 'rate_period must be from 1 millisecond to 1 day, no part of it negative or over that, got 2 days (SQLSTATE 23514)' configure-queue mail --rate-limit 5 --rate-period 2d
expect 2 'pause-queue takes NAME' pause-queue
expect 2 '--max-queued is not an option of resume-queue' resume-queue mail --max-queued 3
[[ $(settings) == "$before" ]] || fail "a refused call changed the queue: $(settings)"
expect 3 'name must be 1-63 characters: ASCII letters, digits, _ . : - (SQLSTATE 23514)' pause-queue 'bad name!'
[[ $(sql "SELECT count(*) FROM bgexec.queue") == 2 ]] || fail "a bad name made a queue"
# configure_queue is not granted to clients
psql -qX -c "CREATE ROLE e2e_tenant LOGIN; GRANT bgexec_client TO e2e_tenant" >/dev/null
expect 3 'permission denied for function configure_queue (SQLSTATE 42501)' \
  resume-queue mail --db "host=$PGHOST port=$PGPORT dbname=postgres user=e2e_tenant"
[[ $(settings) == "$before" ]] || fail "a client changed the queue: $(settings)"
# a client's submit --wait gets the note too (it reads queue_stats, not the
# worker table, which clients may not read)
set +e
timeout 2 "$BGEXEC" submit noop --queue nobody2 --wait --db "host=$PGHOST port=$PGPORT dbname=postgres user=e2e_tenant" \
  >/dev/null 2>"$E2E_DIR/err"; rc=$?
set -e
((rc == 124)) && grep -qE '^note: no live worker claims from queue nobody2 \(bgexec workers lists them\); waiting for job [0-9]+ anyway$' "$E2E_DIR/err" \
  || fail "a client's submit --wait to a queue no worker has: exit $rc, stderr $(cat "$E2E_DIR/err")"
ok

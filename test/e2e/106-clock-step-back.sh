#!/usr/bin/env bash
# A step of the database host's clock back (NTP, a VM resumed) does not stop
# the extension's timers.  The step is made by the test hook
# bgexec.debug_clock_offset (hidden, PGC_SIGHUP): it shifts the wall clock
# the wake module and the watchdog read, in every process at once, leaving
# now() in SQL and the monotonic clock alone -- what a step of the clock
# looks like to timers armed before it.  (libfaketime on the postmaster
# never reached the watchdog, which PG 15 forks from a signal handler.)
#  - the watchdog ticks on: a lease taken after an hour's step is
#    reconciled in about an interval (on the wall clock it slept the hour);
#  - a rate-limited queue's held jobs wake a waiting worker at the refill
#    (the due time recorded before the step was an hour ahead);
#  - await_work's timeout is not stretched by a step made while it waits;
#  - and a step FORWARD: jobs due (run_after) before the new time wake a
#    worker's next wait at once (a due time comes at whichever of its two
#    clocks, wall and monotonic, comes first), not after the delay meant
#    before the step.  (A step made while a wait sleeps cannot be made
#    here: the hook's reload sets every backend's latch, which a real step
#    does not.)
# No daemon: psql alone.
source "$(dirname "$0")/lib.sh"
cluster_start "$E2E_DIR/pg" 58031 "$E2E_FSYNC" "bgexec.watchdog_interval = '300ms'" >/dev/null \
  || fail "cluster did not start"
sql "CREATE EXTENSION bgexec" >/dev/null
ms() { date +%s%3N; }

# step MS [SHOWN]: the clock of the timers MS milliseconds from the real
# one; done once a new session (forked after the postmaster read it) shows
# it (as SHOWN: a positive whole minute shows as 1min).
step() {
  sql "ALTER SYSTEM SET bgexec.debug_clock_offset = '$1'" >/dev/null
  sql "SELECT pg_reload_conf()" >/dev/null
  applied() { [[ $(sql "SHOW bgexec.debug_clock_offset") == "$1" ]]; }
  wait_for 10 applied "${2:-$1}" || fail "the offset $1 was not applied: $(sql "SHOW bgexec.debug_clock_offset")"
}
[[ $(sql "SHOW bgexec.debug_clock_offset") == 0 ]] || fail "no hook"
[[ $(sql "SELECT count(*) FROM pg_settings WHERE name = 'bgexec.debug_clock_offset'") == 0 ]] \
  || fail "the hook shows in pg_settings (SHOW ALL)"

# lost_in N: a ghost worker claims a job with a 1 s lease and vanishes; the
# watchdog alone fails it (worker_lost) within N seconds.
lost_in() {
  local id; id=$(sql "SELECT bgexec.submit('noop', queue => 'wd')")
  [[ $(sql "SELECT count(*) FROM bgexec.claim('ghost', '{wd}', 1, '1 second')") == 1 ]] || fail "claim"
  wait_for "$1" status_is "$id" failed
}
lost_in 10 || fail "the watchdog does not reconcile even before the step"

# The hour's step back, with a rate-limited queue held meanwhile: 1 token a
# 2 s, spent, one job held (its due time recorded at the refill, 2 s on).
sql "SELECT bgexec.configure_queue('rq', rate_limit => 1, rate_period => '2 s')" >/dev/null
sql "SELECT bgexec.submit('noop', queue => 'rq') FROM generate_series(1, 3)" >/dev/null
[[ $(sql "SELECT count(*) FROM bgexec.claim('rw', '{rq}', 10)") == 1 ]] || fail "first token"
[[ $(sql "SELECT count(*) FROM bgexec.claim('rw', '{rq}', 10)") == 0 ]] || fail "the limit did not hold"
t0=$(ms)
step -3600000
# A worker waits (10 s) for the queue: woken at the refill, 2 s after it
# was held, not at its timeout (nor an hour on).
got=$(sql "SELECT jobs FROM bgexec.await_work('rw', '{rq}', 10, '10 s')")
waited=$(($(ms) - t0))
[[ $got == t ]] && ((waited < 6000)) || fail "the held queue's worker was not woken at the refill: jobs $got after $waited ms"
[[ $(sql "SELECT count(*) FROM bgexec.claim('rw', '{rq}', 10)") == 1 ]] || fail "no token at the refill"
# Woken once for it: the due time that came by the monotonic clock only is
# re-armed for its time on the wall clock, not due again at every call (a
# worker woken at each await_work spun on empty claims for the whole step).
t1=$(ms)
got=$(sql "SELECT jobs FROM bgexec.await_work('rw', '{rq}', 10, '1 s')")
[[ $got == f ]] || fail "woken again for the same due time: jobs $got after $(($(ms) - t1)) ms"
ok "rate-limited queue woken at its refill ${waited} ms after the hold"

t0=$(ms)
lost_in 10 || fail "the watchdog stopped ticking after the step back"
ok "watchdog reconciled after the step in $(($(ms) - t0)) ms"

# A step made while a worker waits: its 3 s timeout stays 3 s.  (On the wall
# clock the wait went on for the step; statement_timeout ends it here.)
t0=$(ms)
PGOPTIONS="-c statement_timeout=30s" psql -qXAt -c "SELECT jobs FROM bgexec.await_work('dw', '{dq}', 0, '3 s')" \
  >"$E2E_DIR/wait.out" 2>&1 &
waiter=$!
sleep 1
step -7200000
wait "$waiter" || fail "await_work failed: $(cat "$E2E_DIR/wait.out")"
waited=$(($(ms) - t0))
((waited < 6000)) || fail "await_work's 3 s timeout lasted $waited ms across the step"
[[ $(cat "$E2E_DIR/wait.out") == f ]] || fail "await_work: $(cat "$E2E_DIR/wait.out")"
ok "await_work's 3 s timeout across a step: $waited ms"

t0=$(ms)
lost_in 10 || fail "the watchdog stopped ticking after the second step"
ok "watchdog reconciled after the second step in $(($(ms) - t0)) ms"

# A step forward before the call: the due time has come on the wall clock,
# not yet on the monotonic one (30 s on): woken at once, where a wait on
# the monotonic clock alone slept to its timeout.  (The daemon's waits are
# a second at most, so its next one after the step sees the new time.)
step 0
sql "SELECT bgexec.submit('noop', queue => 'fq2', run_after => now() + interval '30 seconds')" >/dev/null
step 60000 1min
t0=$(ms)
got=$(sql "SELECT jobs FROM bgexec.await_work('fw2', '{fq2}', 1, '10 s')")
waited=$(($(ms) - t0))
[[ $got == t ]] && ((waited < 3000)) || fail "the job due before the step forward: jobs $got after $waited ms"
ok "a step forward before the call: woken in $waited ms"

#!/usr/bin/env bash
# A job stopped and past its timeout: whichever came first on the database
# clock, the stop or the deadline, decides its status, whoever ends it.
#  - stopped before its deadline, a step that ignores TERM keeps it running
#    through the kill grace past the deadline: the watchdog reaches it at
#    the deadline and ends it cancelled (reason stopped, no worker_lost: the
#    worker is alive). It ended timed_out, although the stop came first,
#    while the worker's own finish (had it come first) said cancelled;
#  - the deadline first, then a stop: timed_out (the watchdog has ended it
#    at its deadline by then, or does, the stop coming after it).
# The worker's own finish of the two orders is regress `deadlines` (its
# deadline timer and the stop race by milliseconds here).
source "$(dirname "$0")/lib.sh"
e2e_cluster 59214 "bgexec.watchdog_interval = '200ms'"
start_worker w1 --allow-run --kill-grace 8 --lease 30
deaf='{"steps": [{"id": "s", "run": ["sh", "-c", "trap \"\" TERM; sleep 60"]}]}'
started() { [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $1 AND kind = 'step_started'") == 1 ]]; }
outcome() {
  sql "SELECT status || ' ' || coalesce(error->>'reason', '-') || ' ' ||
              (SELECT string_agg(kind, ',' ORDER BY seq) FROM bgexec.job_event WHERE job_id = j.id)
         FROM bgexec.job j WHERE id = $1"
}

a=$("$BGEXEC" submit workflow "$deaf" --timeout 4s) || fail submit
wait_for 20 started "$a" || fail "job $a did not start: $(job_status "$a")"
"$BGEXEC" stop "$a" >/dev/null || fail stop
[[ $(sql "SELECT stop_requested_at < deadline FROM bgexec.job WHERE id = $a") == t ]] \
  || fail "the stop did not come before the deadline: the test tests nothing"
wait_for 20 job_ended "$a" || fail "job $a still $(job_status "$a")"
got=$(outcome "$a")
[[ $got == "cancelled stopped started,step_started,stop_requested,cancelled" ]] \
  || fail "stopped before its deadline, the job ended: $got"
ok "stopped before the deadline, still ending its steps at it: $got"

b=$("$BGEXEC" submit workflow "$deaf" --timeout 2s) || fail submit
wait_for 20 started "$b" || fail "job $b did not start: $(job_status "$b")"
past() { [[ $(sql "SELECT coalesce(deadline < now(), true) FROM bgexec.job WHERE id = $1") == t ]]; }
wait_for 20 past "$b" || fail "job $b never passed its deadline"
"$BGEXEC" stop "$b" >/dev/null || fail stop
wait_for 20 job_ended "$b" || fail "job $b still $(job_status "$b")"
got=$(outcome "$b")
[[ $got == "timed_out timeout "* ]] || fail "the deadline first, then a stop: the job ended $got"
ok "the deadline first, then a stop: $got"

#!/usr/bin/env bash
# What makes a worker claim.  A wake for its queue (await_claim picked it;
# e2e 22 for the fleet), a full last claim, a job that ended, or the poll
# interval do; a job's finish being queued does not (each job used to cost
# two more claims that found nothing, now one).  Under LISTEN, idle workers
# on one queue all wake for each submit and all but one find nothing: after
# such a claim, the next one a NOTIFY calls for waits (1 ms doubling to
# --claim-backoff), so their empty claims stay bounded.  And the
# wake-ups that matter are kept: a wake that arrives while every slot is
# busy is claimed for when one frees, a job whose run_after passes starts
# then, a capped queue's next job is claimed when its running one ends, and
# a job submitted just after a busy worker's slot freed is claimed when the
# wait sent while it was busy returns.  An idle worker's wait holds no xmin.
source "$(dirname "$0")/lib.sh"
# Claims are counted by the server (pg_stat_statements), whatever the worker
# logs; track = all counts the claims await_claim makes inside its call.
e2e_cluster 57962 "shared_preload_libraries = 'bgexec,pg_stat_statements'" "pg_stat_statements.track = all"
sql "CREATE EXTENSION pg_stat_statements" >/dev/null

# claims: "calls rows" of the workers' claim statement since the last reset
claims() {
  sql "SELECT coalesce(sum(calls), 0) || ' ' || coalesce(sum(rows), 0) FROM pg_stat_statements
        WHERE query LIKE '%FROM bgexec.claim(%'"
}
reset_claims() { sql "SELECT pg_stat_statements_reset()" >/dev/null; }
# all_completed QUEUE TIMEOUT_S: waits until every job of QUEUE is completed
all_done() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = '$1' AND status <> 'completed'") == 0 ]]; }
all_completed() {
  wait_for "$2" all_done "$1" ||
    fail "jobs of $1 after $2 s: $(sql "SELECT string_agg(status || ' ' || n, ', ') FROM
                                        (SELECT status, count(*) n FROM bgexec.job WHERE queue = '$1' GROUP BY 1) s")"
}
# submit_spaced N QUEUE GAP_S: N noop jobs one at a time (each its own
# transaction, one session), GAP_S apart; waits for all to complete
submit_spaced() {
  local i
  for ((i = 0; i < $1; i++)); do
    echo "SELECT bgexec.submit('noop', '{}', '$2'); SELECT pg_sleep($3);"
  done | psql -qXAt -v ON_ERROR_STOP=1 >/dev/null || fail "submits to $2"
  all_completed "$2" 30
}

# wait_listening NAME...: until each worker's notifier waits for work
wait_listening() {
  local w
  for w in "$@"; do
    wait_for 10 grep -q 'msg=listening' "$E2E_DIR/$w.log" || fail "$w did not listen"
  done
}
# claims_for N QUEUE GAP_S MAX WHAT: N jobs spaced out to QUEUE's idle
# workers; each claimed once, in at most MAX claims
claims_for() {
  local n=$1 q=$2 max=$4 what=$5 calls rows
  reset_claims
  submit_spaced "$n" "$q" "$3"
  read -r calls rows <<<"$(claims)"
  echo "# $what, $n jobs: $calls claims, $rows jobs claimed"
  ((rows == n)) || fail "$rows jobs claimed, expected $n"
  ((calls <= max)) || fail "$calls claims for $n jobs to $what, more than $max"
}

# 1. One worker, 40 jobs 20 ms apart: one claim per job, the wake's, made
#    in await_claim (40 measured); two with await_work (the wake's and one
#    when the job had ended), three before that (one more when its finish
#    was queued).
start_worker solo --queue solo --concurrency 4 --poll 5
wait_listening solo
# While it sleeps in await_claim, the idle worker's session holds back no
# xmin horizon (pg_regress await_xmin for the rules): the daemon's own
# statement is one await_work lets go of its snapshot for.
asleep_xmin() {
  sql "SELECT backend_xmin IS NULL FROM pg_stat_activity
        WHERE application_name = 'bgexec worker listen' AND wait_event_type = 'Extension'"
}
asleep() { [[ -n $(asleep_xmin) ]]; }
wait_for 10 asleep || fail "solo's notifier did not wait in await_claim"
[[ $(asleep_xmin) == t ]] || fail "solo's waiting session holds an xmin back"
claims_for 40 solo 0.02 60 "one worker"
kill "$PID_solo"; wait "$PID_solo" || true

# 2. Four idle workers on one queue, 100 jobs 10 ms apart: await_claim wakes
#    one of them per job, which claims in the wait (100 claims; 200 with
#    await_work, which claimed again when the job had ended).  Under LISTEN
#    every submit woke all four: 222-300 claims, 500 with --claim-backoff 0
#    (e2e 22), 600 before the backoff.
for w in h1 h2 h3 h4; do start_worker "$w" --queue herd --concurrency 4 --poll 5; done
wait_listening h1 h2 h3 h4
claims_for 100 herd 0.01 150 "four idle workers"
[[ $(sql "SELECT count(*) FROM bgexec.job_event e JOIN bgexec.job j ON j.id = e.job_id
            WHERE j.queue = 'herd' AND e.kind = 'started'") == 100 ]] || fail "started events"

# 3. A job while the only slot is busy: claimed for when the slot frees,
#    not at the next poll (30 s).
start_worker one --queue one --concurrency 1 --poll 30
wait_listening one
busy=$(sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"s\", \"sleep\": 1}]}', 'one')")
wait_status "$busy" running 10
next=$(sql "SELECT bgexec.submit('noop', '{}', 'one')")
wait_status "$next" completed 10
gap=$(sql "SELECT extract(epoch FROM n.started_at - b.finished_at)
             FROM bgexec.job n, bgexec.job b WHERE n.id = $next AND b.id = $busy")
echo "# the waiting job started ${gap}s after the busy one finished"
awk -v g="$gap" 'BEGIN {exit !(g < 5)}' || fail "the job that arrived while the slot was busy waited ${gap}s"

# 4. A job whose run_after is ahead starts when it passes: await_claim wakes
#    the worker then (with --poll 30 the poll would find it up to 30 s late;
#    without await_claim, up to --poll late).
start_worker later --queue later --concurrency 2 --poll 30
wait_listening later
late=$(sql "SELECT bgexec.submit('noop', '{}', 'later', run_after => now() + interval '1 second')")
wait_status "$late" completed 15
lag=$(sql "SELECT extract(epoch FROM started_at - run_after) FROM bgexec.job WHERE id = $late")
echo "# the delayed job started ${lag}s after its run_after"
awk -v g="$lag" 'BEGIN {exit !(g < 3)}' || fail "the delayed job started ${lag}s after its run_after"

# 5. A queue with max_running 1: nothing announces its next job when the
#    running one ends; the worker that ran it claims then (with --poll 30,
#    30 jobs would take 15 minutes on the poll).
sql "SELECT bgexec.configure_queue('capped', max_running => 1)" >/dev/null
start_worker capped --queue capped --concurrency 4 --poll 30
wait_listening capped
sql "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'capped'))
                                                FROM generate_series(1, 30)))" >/dev/null
all_completed capped 20
echo "# capped queue: 30 jobs one at a time in $(sql "SELECT round(extract(epoch FROM max(finished_at) - min(started_at))::numeric, 2)
                                                  FROM bgexec.job WHERE queue = 'capped'")s"

# 6. After a burst: one worker x 4 works through 40 jobs of one commit
#    (its wait claims none then, the fetcher claims as slots free), then
#    single jobs 20 ms apart each start at once.  Its wait used to count on
#    no free slot after a backlog, for up to a second, and wakes passed it
#    by: the bench's idle worker under a trickle had 585 ms pickup p50.
start_worker burst --queue burst --concurrency 4 --poll 5
wait_listening burst
sql "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'burst'))
                                                FROM generate_series(1, 40)))" >/dev/null
all_completed burst 20
for ((i = 0; i < 20; i++)); do echo "SELECT bgexec.submit('noop', '{}', 'burst'); SELECT pg_sleep(0.02);"; done |
  psql -qXAt -v ON_ERROR_STOP=1 >/dev/null || fail "submits to burst"
all_completed burst 20
# The median, and a generous bound on the slowest: one stall of this shared
# machine makes a maximum of twenty, where the bug made the median 585 ms.
read -r median slowest < <(sql "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - created_at))::numeric, 3),
                                       round(extract(epoch FROM max(started_at - created_at))::numeric, 3)
                                  FROM bgexec.job
                                 WHERE queue = 'burst' AND id > (SELECT min(id) + 39 FROM bgexec.job WHERE queue = 'burst')" | tr '|' ' ')
echo "# after a burst, single jobs started within ${median}s at the median, ${slowest}s the slowest"
awk -v m="$median" -v g="$slowest" 'BEGIN {exit !(m < 0.3 && g < 3)}' \
  || fail "single jobs after a burst waited ${median}s at the median, ${slowest}s the slowest, to start"

# 7. A job submitted just after the only slot frees: the notifier's wait
#    was sent while the slot was busy, so it counts on no slot and wakes
#    pass it by, and the fetcher's claim at the job's end came before the
#    submit.  The notifier polls when that wait returns (a fifth of a
#    second at most); it used to wait for --poll (30 s here).  Eight
#    rounds, each submit 30 ms after the busy job's finish committed: most
#    land in that wait.
start_worker deaf --queue deaf --concurrency 1 --poll 30
wait_listening deaf
for ((i = 0; i < 8; i++)); do
  busy=$(sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"s\", \"sleep\": 0.3}]}', 'deaf')")
  # started (a loaded host's poll may first see it completed: 0.3 s)
  started() { [[ $(sql "SELECT started_at IS NOT NULL FROM bgexec.job WHERE id = $busy") == t ]]; }
  wait_for 10 started || fail "round $i: job $busy is $(job_status "$busy"), not started"
  next=$(sql "DO \$\$ BEGIN
                WHILE (SELECT status FROM bgexec.job WHERE id = $busy) <> 'completed' LOOP
                  PERFORM pg_sleep(0.005);
                END LOOP;
                PERFORM pg_sleep(0.03);
              END \$\$; SELECT bgexec.submit('noop', '{}', 'deaf')")
  # (the bug's lag is the poll, 30 s)
  wait_for 10 status_is "$next" completed || true
  lag=$(sql "SELECT coalesce(extract(epoch FROM started_at - created_at), -1) FROM bgexec.job WHERE id = $next")
  awk -v g="$lag" 'BEGIN {exit !(g >= 0 && g < 5)}' \
    || fail "round $i: a job submitted just after the slot freed started after ${lag}s (-1: not yet)"
done
echo "# jobs submitted just after the slot freed started within $(sql "SELECT round(extract(epoch FROM max(started_at - created_at))::numeric, 3)
                                                                    FROM bgexec.job WHERE queue = 'deaf' AND kind = 'noop'")s (8 rounds)"

for w in h1 h2 h3 h4 one later capped burst deaf; do p=PID_$w; kill -0 "${!p}" || fail "worker $w died"; done
ok

#!/usr/bin/env bash
# A sleep step survives a deploy: a worker draining (SIGTERM) gives a job
# whose running steps are all sleeps back to the queue, its attempt not
# counted, until the sleep's wake-up on the database clock; the next run,
# on any worker, sleeps only what is left (bgexec.snooze, sleep_left).
# Before, the drain's grace ran out and the job failed (worker_shutdown;
# with max_attempts 1 for good, with more it slept its whole time again on
# an attempt of its own), so a sleep longer than --grace never survived a
# deploy.
#   A: sleep 8, then a step after it; max_attempts 1; w1 drained 4 s in.
#   B: sleeps of 6 and 12 s side by side, then a step after both; given
#      back by w1 at 4 s, run again by w2 at 6 s (the short one done at
#      once, the long one sleeping its 6 s left), given back again as w2
#      drains at 9.5 s, and done by w3 at 12 s.
# Then --snooze-after (below).
source "$(dirname "$0")/lib.sh"
e2e_cluster 58032

t0=$(date +%s.%N)
since() { echo "$(date +%s.%N) - $t0" | bc; }
start_worker w1 --queue sl --lease 3 --grace 1 --poll 0.2
a=$(sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"wait\", \"sleep\": 8},
          {\"id\": \"after\", \"needs\": [\"wait\"], \"sleep\": 0}]}', queue => 'sl')")
b=$(sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"short\", \"sleep\": 6}, {\"id\": \"long\", \"sleep\": 12},
          {\"id\": \"after\", \"needs\": [\"short\", \"long\"], \"sleep\": 0}]}', queue => 'sl')")
sleeping() { [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE kind = 'step_started'") == 3 ]]; }
wait_for 3 sleeping || fail "the sleeps did not start"
sleep "$(echo "4 - $(since)" | bc)"
kill -TERM "$PID_w1"
wait "$PID_w1" || fail "w1 exited $? on SIGTERM"
echo "# w1 drained at $(since) s"
start_worker w2 --queue sl --lease 3 --grace 1 --poll 0.2
wait_status "$a" completed 10
sleep "$(echo "9.5 - $(since)" | bc)"
[[ $(job_status "$b") == running ]] || fail "job B is $(job_status "$b") at 9.5 s, expected running (its long sleep)"
kill -TERM "$PID_w2"
wait "$PID_w2" || fail "w2 exited $? on SIGTERM"
echo "# w2 drained at $(since) s"
start_worker w3 --queue sl --lease 3 --grace 1 --poll 0.2
wait_status "$b" completed 10

for j in "$a" "$b"; do
  echo "# job $j: $(sql "SELECT string_agg(e.seq || ' ' || e.kind || coalesce(' ' || (e.data->>'step'), '')
                          || coalesce(' ' || (e.data->'error'->>'reason'), '') || ' +'
                          || round(extract(epoch FROM e.created_at - j.created_at)::numeric, 2), ', ' ORDER BY e.seq)
                         FROM bgexec.job_event e JOIN bgexec.job j ON j.id = e.job_id WHERE j.id = $j")"
done
# Each job: attempt 1, its events gapless, one step_completed per step,
# each run that slept given back (retry_scheduled, reason sleeping).
check() {  # JOB MIN_S MAX_S GIVEN_BACK STEPS...
  local j=$1 lo=$2 hi=$3 back=$4 s; shift 4
  read -r att total gapless gb <<<"$(sql "SELECT j.attempt, round(extract(epoch FROM j.finished_at - j.created_at)::numeric, 2),
      (SELECT count(*) = max(seq) FROM bgexec.job_event WHERE job_id = j.id),
      (SELECT count(*) FROM bgexec.job_event WHERE job_id = j.id AND kind = 'retry_scheduled'
          AND data->'error'->>'reason' = 'sleeping')
    FROM bgexec.job j WHERE j.id = $j" | tr '|' ' ')"
  echo "# job $j: attempt $att, completed $total s after submit, given back $gb times"
  [[ $att == 1 ]] || fail "job $j ended at attempt $att, expected 1 (a give-back counts no attempt)"
  [[ $gapless == t ]] || fail "job $j: its events are not gapless"
  [[ $gb == "$back" ]] || fail "job $j was given back sleeping $gb times, expected $back"
  (($(echo "$total >= $lo && $total <= $hi" | bc))) || fail "job $j completed $total s after submit, expected $lo-$hi s"
  for s in "$@"; do
    [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $j AND kind = 'step_completed'
                AND data->>'step' = '$s'") == 1 ]] || fail "job $j: step $s has not exactly one step_completed"
  done
}
check "$a" 7.9 10.5 1 wait after
check "$b" 11.9 14.5 2 short long after
# A run after a give-back is claimed at the wake-up on the database clock,
# not before: each started event after a give-back follows it by at least
# its delay.
early=$(sql "SELECT count(*) FROM bgexec.job_event r JOIN bgexec.job_event s
               ON s.job_id = r.job_id AND s.seq = r.seq + 1 AND s.kind = 'started'
             WHERE r.kind = 'retry_scheduled'
               AND s.created_at < r.created_at + (r.data->>'delay_ms')::int * interval '1 ms' - interval '5 ms'")
[[ $early == 0 ]] || fail "$early runs were claimed before their sleep's wake-up"
grep -q 'msg="job given back while it sleeps"' "$E2E_DIR/w1.log" || fail "w1 does not log the give-back"
kill -TERM "$PID_w3"; wait "$PID_w3" || fail "w3 exited $? on SIGTERM"
ok "a sleep survives two drains, on the database clock, its attempt not counted"

# --snooze-after: a job sleeping alone with more than that left goes back
# to the queue at once, so its worker's one slot runs other jobs meanwhile.
# C sleeps 5 s (given back at once; step_failed and retry_scheduled
# "sleeping"), D is a noop submitted after it; E's sleep has a timeout of
# its own (3 s), so it is not given back and times out as before.
start_worker w4 --queue sl --lease 3 --grace 1 --poll 0.2 --concurrency 1 --snooze-after 2
c=$(sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"nap\", \"sleep\": 5},
          {\"id\": \"after\", \"needs\": [\"nap\"], \"sleep\": 0}]}', queue => 'sl')")
wait_for 5 bash -c "[[ \$(psql -qXAt -c \"SELECT status FROM bgexec.job WHERE id = $c\") == queued &&
                      \$(psql -qXAt -c \"SELECT attempt FROM bgexec.job WHERE id = $c\") == 0 ]]" \
  || fail "job C was not given back: $(job_status "$c")"
d=$(sql "SELECT bgexec.submit('noop', queue => 'sl')")
wait_status "$d" completed 3
[[ $(job_status "$c") == queued ]] || fail "job C is $(job_status "$c") as the noop completed, expected queued (sleeping)"
wait_status "$c" completed 10
check "$c" 4.9 7.5 1 nap after
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $c AND kind = 'step_failed'
            AND data->'error'->>'reason' = 'sleeping'") == 1 ]] || fail "job C: no step_failed (sleeping) for its nap"
e=$(sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"t\", \"sleep\": 5, \"timeout\": 3}]}', queue => 'sl')")
wait_status "$e" failed 10
[[ $(sql "SELECT (error->>'reason') || ' ' || attempt || ' ' || (SELECT count(*) FROM bgexec.job_event
            WHERE job_id = $e AND kind = 'retry_scheduled') FROM bgexec.job WHERE id = $e") == "step_timeout 1 0" ]] \
  || fail "job E: $(sql "SELECT error, attempt FROM bgexec.job WHERE id = $e")"
ok "--snooze-after gives a long sleep back at once, freeing the slot; a sleep with a timeout stays"

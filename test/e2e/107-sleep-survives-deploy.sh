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
grep -q 'msg="job given back while it sleeps"' "$E2E_DIR/w1.log" || grep -q 'msg=job given back while it sleeps' "$E2E_DIR/w1.log" \
  || fail "w1 does not log the give-back"
ok

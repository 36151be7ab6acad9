#!/usr/bin/env bash
# A worker whose host cannot start processes (RLIMIT_NPROC reached: the
# cgroup's pids.max, descriptors or memory run out the same way) gives the
# jobs whose steps it could not start back to the queue, their attempt not
# counted, and claims nothing until a process starts again.  It failed
# every job it claimed, at full speed (200 in 3 s; beside a healthy worker,
# 196 of 400), and nothing said the host was the problem.
# Needs root: prlimit and setpriv run the broken worker as a uid of its own
# (58030, this test's port), whose process count is its alone.
source "$(dirname "$0")/lib.sh"
[[ $(id -u) == 0 ]] || { echo "ok $E2E_NAME: skipped (needs root for prlimit and setpriv)"; exit 0; }
e2e_cluster 58030

steps='{"steps": [{"id": "s", "run": ["true"]}]}'
submit_many() {  # N: N one-step workflow jobs, max_attempts 1 (at most once)
  sql "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'workflow',
         'queue', 'q', 'max_attempts', 1, 'payload', '$steps'::jsonb)) FROM generate_series(1, $1)))" >/dev/null
}
ended() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE finished_at IS NOT NULL") == "$1" ]]; }
line=$'not claiming: step processes cannot be started'

# 1. The broken worker alone, 50 jobs queued: it claims some, cannot start
# their steps, gives them back and stops claiming; a healthy worker then
# runs every job, none failed, none past its first attempt.
as_uid=(setpriv --reuid=58030 --regid=58030 --clear-groups)
hard=$(ulimit -Hu)  # the soft limit only: lifting it again needs no privilege
prlimit --nproc="3:$hard" "${as_uid[@]}" \
  "$BGEXEC" worker --id broken --queue q --lease 5 --allow-run --concurrency 4 >>"$E2E_DIR/broken.log" 2>&1 &
E2E_PIDS+=($!); broken=$!
wait_for 20 grep -q 'msg=listening' "$E2E_DIR/broken.log" || fail "the broken worker did not start"
submit_many 50
wait_for 20 grep -q "$line" "$E2E_DIR/broken.log" \
  || fail "the broken worker did not stop claiming: $(sql "SELECT status, count(*) FROM bgexec.job GROUP BY 1")"
start_worker healthy --queue q --lease 5 --allow-run --concurrency 2
wait_for 90 ended 50 || fail "the 50 jobs did not end: $(sql "SELECT status, count(*) FROM bgexec.job GROUP BY 1")"
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE status = 'completed'") == 50 ]] \
  || fail "not all completed: $(sql "SELECT status, error->>'message', count(*) FROM bgexec.job GROUP BY 1, 2")"
[[ $(sql "SELECT max(attempt) FROM bgexec.job") == 1 ]] || fail "a job took more than one attempt"
[[ $(grep -c "$line" "$E2E_DIR/broken.log") == 1 ]] || fail "the not-claiming line is not there once"
grep "$line" "$E2E_DIR/broken.log" | grep -q 'errno=EAGAIN' || fail "the line does not name the errno"
given=$(sql "SELECT count(*) FROM bgexec.job_event WHERE kind = 'retry_scheduled'
               AND data->'error'->>'reason' = 'cannot_start_steps'")
((given >= 1)) || fail "no job was given back"
# Each given back: step_started, its step_failed (reason cannot_start_steps),
# then retry_scheduled; a gapless log ending completed.
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE kind = 'step_failed'
            AND data->'error'->>'reason' = 'cannot_start_steps'") == "$given" ]] || fail "step_failed and give-backs differ"
[[ $(sql "SELECT count(*) FROM (SELECT job_id FROM bgexec.job_event GROUP BY job_id
            HAVING count(*) <> max(seq) OR min(seq) <> 1) g") == 0 ]] || fail "an event log has a gap"
[[ $(sql "SELECT count(*) FROM bgexec.job j WHERE (SELECT kind FROM bgexec.job_event e WHERE e.job_id = j.id
            ORDER BY seq DESC LIMIT 1) <> 'completed'") == 0 ]] || fail "a job's last event is not completed"
grep -q 'msg="job finished"' "$E2E_DIR/broken.log" && fail "the broken worker finished a job"
# Its row stays live while it waits (heartbeats every third of its 5 s
# lease, no lease held): one that paused them looked gone for as long.
sleep 6
[[ $(sql "SELECT now() - heartbeat_at < interval '4 s' FROM bgexec.worker WHERE id = 'broken'") == t ]] \
  || fail "the waiting worker stopped heartbeating: $(sql "SELECT now() - heartbeat_at FROM bgexec.worker WHERE id = 'broken'")"
ok "part 1: $given jobs given back, all 50 completed at attempt 1"

# 2. The limit lifted: the probe starts a process, the worker claims again
# and runs the queue alone.
kill "$PID_healthy"; wait_for 20 gone "$PID_healthy" || fail "the healthy worker did not stop"
# (By the uid itself: root here may lack CAP_SYS_RESOURCE, which acting on
# another uid's process takes.)
"${as_uid[@]}" prlimit --pid "$broken" --nproc="$hard:$hard" || fail "the limit could not be lifted"
wait_for 45 grep -q 'msg="claiming again"' "$E2E_DIR/broken.log" || fail "the broken worker did not claim again"
submit_many 20
wait_for 60 ended 70 || fail "the 20 jobs did not end: $(sql "SELECT status, count(*) FROM bgexec.job GROUP BY 1")"
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE status = 'completed'") == 70 ]] \
  || fail "not all completed: $(sql "SELECT status, error->>'message', count(*) FROM bgexec.job GROUP BY 1, 2")"
[[ $(grep -c 'msg="job finished"' "$E2E_DIR/broken.log") == 20 ]] || fail "the broken worker did not run the 20 jobs"
ok "part 2: claiming again, the 20 jobs run"

# 3. Where a step of the attempt had started (a sql statement ran), the step
# that cannot start fails the attempt as before, counted: its effects may
# be out there.  A worker of another uid (58031), alone, the same limit.
kill "$broken"; wait_for 20 gone "$broken" || fail "the broken worker did not stop"
prlimit --nproc="3:$hard" setpriv --reuid=58031 --regid=58031 --clear-groups \
  "$BGEXEC" worker --id broken2 --queue q --lease 5 --allow-run --concurrency 4 >>"$E2E_DIR/broken2.log" 2>&1 &
E2E_PIDS+=($!)
wait_for 20 grep -q 'msg=listening' "$E2E_DIR/broken2.log" || fail "the second broken worker did not start"
ran=$(sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"a\", \"sql\": \"SELECT 1\"},
             {\"id\": \"b\", \"needs\": [\"a\"], \"run\": [\"true\"]}]}', queue => 'q')")
wait_status "$ran" failed 30
[[ $(sql "SELECT error->>'reason' IS NULL AND error->>'retryable' = 'true' AND attempt = 1 FROM bgexec.job WHERE id = $ran") == t ]] \
  || fail "the attempt that ran a step: $(sql "SELECT attempt, error FROM bgexec.job WHERE id = $ran")"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $ran AND kind = 'retry_scheduled'") == 0 ]] \
  || fail "the attempt that ran a step was given back"
wait_for 10 grep -q "$line" "$E2E_DIR/broken2.log" || fail "the second broken worker did not stop claiming"
ok

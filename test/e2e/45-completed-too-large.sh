#!/usr/bin/env bash
# A job whose completed steps are past what one jsonb holds (17 outputs of
# 16 MB: 256 MiB) made every claim of its queue fail: the job stayed queued
# at the queue's head for ever and no job behind it was claimed, on every
# worker.  Now the claim hands it over with the reason, and the worker
# fails it (not retried) and goes on with the queue.  The earlier run is
# played by this script through the SQL API, as a worker would write it.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57999

id=$(sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"a\", \"sleep\": 0}]}', queue => 'big', max_attempts => 3)")
lease=$(sql "SELECT lease FROM bgexec.claim('by-hand', '{big}', 1)")
sql "SELECT count(bgexec.append_event($id, $lease, 'step_completed',
                                      jsonb_build_object('step', 's' || i, 'output', repeat('x', 16000000))))
       FROM generate_series(1, 17) i" >/dev/null
sql "SELECT bgexec.finish($id, $lease, 'failed', '{\"message\": \"first run\", \"retryable\": true}')" >/dev/null
sql "UPDATE bgexec.job SET run_after = now() WHERE id = $id" >/dev/null
behind=$("$BGEXEC" submit noop --queue big)

# A lease of 30 s (past start_worker's 2 s): the claim that meets the job
# builds its 256 MiB of outputs before it knows, a second or two.
start_worker w1 --queue big --lease 30
wait_status "$behind" completed 60
wait_status "$id" failed 60
msg=$(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $id")
[[ $msg == "completed steps cannot be read: the outputs of its completed steps are over what one JSON value holds: total size of jsonb"* ]] \
  || fail "the job's error: $msg"
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $id") == 2 ]] || fail "the job was retried: attempt $(sql "SELECT attempt FROM bgexec.job WHERE id = $id")"
ok

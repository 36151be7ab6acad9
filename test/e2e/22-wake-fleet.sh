#!/usr/bin/env bash
# An idle fleet waits in bgexec.await_claim, and each commit wakes the
# workers its jobs need, not every worker: with LISTEN, every NOTIFY woke
# every listening backend of the database, and each woke to a commit of its
# own (about two commits per worker per submit).  A stop request wakes the
# worker holding the job at once (not at its next heartbeat).  Without
# bgexec in shared_preload_libraries the workers LISTEN instead, and jobs
# and stops still arrive at once.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57963 "shared_preload_libraries = 'bgexec,pg_stat_statements'" "pg_stat_statements.track = all"
sql "CREATE EXTENSION pg_stat_statements" >/dev/null

commits() { sql "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"; }
# (track = all: await_claim's claims are made inside its call)
claims() { sql "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE '%FROM bgexec.claim(%'"; }
all_done() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = '$1' AND status <> 'completed'") == 0 ]]; }
# submit_spaced N QUEUE GAP_S: N noop jobs one at a time, each its own transaction
submit_spaced() {
  local i
  for ((i = 0; i < $1; i++)); do
    echo "SELECT bgexec.submit('noop', '{}', '$2'); SELECT pg_sleep($3);"
  done | psql -qXAt -v ON_ERROR_STOP=1 >/dev/null || fail "submits to $2"
  wait_for 30 all_done "$2" || fail "jobs of $2 did not complete"
}
# stop_lands NAME QUEUE: a running job of worker NAME is cancelled within
# 10 s of its stop (the workers run --lease 60: the heartbeat comes every
# 20 s from the worker's start, a few seconds before the stop; a stop left
# to it lands some 15 s on)
stop_lands() {
  local id ms start
  id=$(sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"s\", \"sleep\": 120}]}', '$2')")
  wait_status "$id" running 10
  sleep 0.3
  start=$(date +%s%N)
  sql "SELECT bgexec.stop($id)" >/dev/null
  wait_status "$id" cancelled 30
  ms=$((($(date +%s%N) - start) / 1000000))
  echo "# $1: a running job cancelled ${ms} ms after its stop"
  ((ms < 10000)) || fail "$1 cancelled its job ${ms} ms after the stop"
}

# 1. Eight idle workers, 100 jobs 10 ms apart.  Commits per job: the
#    submitter's two, the wait that claims, a finish (5.1 measured); 7.0
#    with await_work (a claim after the wake, one after the job ended), and
#    with LISTEN 24.3.  Claims for the 100 jobs: 100 in await_claim, 200
#    with await_work, 453 with LISTEN.  The workers stop before the count:
#    their backends report their commits when they exit.
fleet=()
for i in 1 2 3 4 5 6 7 8; do
  start_worker "f$i" --queue fleet --concurrency 4 --poll 5 --lease 60
  fleet+=("$WORKER_PID")
done
for i in 1 2 3 4 5 6 7 8; do
  wait_for 10 grep -q 'msg=listening via=await_claim' "$E2E_DIR/f$i.log" || fail "f$i does not wait in await_claim"
done
sql "SELECT pg_stat_statements_reset()" >/dev/null
c0=$(commits)
submit_spaced 100 fleet 0.01
calls=$(claims)
stop_pids "${fleet[@]}"
sleep 1
c1=$(commits)
per_job=$(((c1 - c0) * 10 / 100))
echo "# eight idle workers, 100 jobs: $((per_job / 10)).$((per_job % 10)) commits per job, $calls claims"
((per_job <= 100)) || fail "$((per_job / 10)).$((per_job % 10)) commits per job to eight idle workers"
((calls <= 150)) || fail "$calls claims for 100 jobs to eight idle workers"
[[ $(sql "SELECT count(*) FROM bgexec.job_event e JOIN bgexec.job j ON j.id = e.job_id
            WHERE j.queue = 'fleet' AND e.kind = 'started'") == 100 ]] || fail "started events"

# 2. A stop is delivered through await_claim.
start_worker s1 --queue stops --concurrency 2 --lease 60
wait_for 10 grep -q 'msg=listening via=await_claim' "$E2E_DIR/s1.log" || fail "s1 does not wait in await_claim"
stop_lands s1 stops

# 3. Without the preloaded module: LISTEN, and the same promptness (a job
#    picked up well before the 30 s poll, a stop well before the heartbeat).
#    Four idle workers then all wake for each submit; after a claim that
#    found nothing the next one a NOTIFY calls for waits (--claim-backoff),
#    so 100 jobs cost 222-300 claims, not 499 (--claim-backoff 0).
stop_pids "$PID_s1"
echo "shared_preload_libraries = 'pg_stat_statements'" >>"$E2E_DIR/pg/data/postgresql.conf"
cluster_restart "$E2E_DIR/pg" || fail "restart"
[[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'bgexec watchdog'") == 0 ]] \
  || fail "bgexec still preloaded"
start_worker l1 --queue plain --concurrency 2 --poll 30 --lease 60
wait_for 10 grep -q 'msg=listening channels=bgexec_jobs,bgexec_stop' "$E2E_DIR/l1.log" || fail "l1 does not LISTEN"
grep -q 'await_claim unavailable' "$E2E_DIR/l1.log" || fail "no word of the fallback"
id=$(sql "SELECT bgexec.submit('noop', '{}', 'plain')")
wait_status "$id" completed 10
lag=$(sql "SELECT extract(epoch FROM started_at - created_at) FROM bgexec.job WHERE id = $id")
echo "# l1 (LISTEN): the job started ${lag}s after its submit"
awk -v g="$lag" 'BEGIN {exit !(g < 5)}' || fail "the job waited ${lag}s: the NOTIFY did not wake the worker"
stop_lands l1 plain
herd=()
for i in 1 2 3 4; do
  start_worker "h$i" --queue herd --concurrency 4 --poll 5
  herd+=("$WORKER_PID")
done
for i in 1 2 3 4; do
  wait_for 10 grep -q 'msg=listening channels=' "$E2E_DIR/h$i.log" || fail "h$i does not LISTEN"
done
sql "SELECT pg_stat_statements_reset()" >/dev/null
submit_spaced 100 herd 0.01
calls=$(claims)
echo "# four idle workers under LISTEN, 100 jobs: $calls claims"
((calls <= 420)) || fail "$calls claims for 100 jobs to four LISTENing workers"
for p in "$PID_l1" "${herd[@]}"; do kill -0 "$p" || fail "worker $p died"; done
ok

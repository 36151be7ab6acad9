#!/usr/bin/env bash
# Wakes go to a worker that lists the job's queue, also when workers claim
# from more than 32 queues (extension/wake.c keeps those in a Bloom filter
# of the slot).  Such a worker matched every queue: three workers of queues
# a1..a40 took the wakes of the jobs of b1 (the one that went to sleep last
# is picked), claimed nothing over their own queues, and each job waited
# for the poll of the worker of b1..b40 (p99 940 ms at --poll 1; here
# --poll 5, so a stolen wake is seconds, where a wake is milliseconds).
source "$(dirname "$0")/lib.sh"
e2e_cluster 58022 "shared_preload_libraries = 'bgexec'"

qs() { local p=$1 i out=(); for ((i = 1; i <= 40; i++)); do out+=("$p$i"); done; (IFS=,; echo "${out[*]}"); }
for w in a1 a2 a3; do start_worker "$w" --queue "$(qs a)" --concurrency 10 --poll 5 --lease 30; done
start_worker b1 --queue "$(qs b)" --concurrency 10 --poll 5 --lease 30
for w in a1 a2 a3 b1; do
  wait_for 10 grep -q 'msg=listening via=await_claim' "$E2E_DIR/$w.log" || fail "$w does not wait in await_claim"
done
# Past every worker's first poll (a claim at its start).
sleep 1

# spaced_pickups QUEUE N GAP_S: N noop jobs to QUEUE, each in its own
# transaction, GAP_S apart; when all completed, prints the slowest pickup
# (started_at - created_at) in ms and how many took over 2 s.
spaced_pickups() {
  local i
  for ((i = 0; i < $2; i++)); do
    echo "SELECT bgexec.submit('noop', '{}', '$1'); SELECT pg_sleep($3);"
  done | psql -qXAt -v ON_ERROR_STOP=1 >/dev/null || fail "submits to $1"
  wait_for 30 all_done "$1" || fail "jobs of $1 did not complete"
  sql "SELECT round(max(extract(epoch FROM started_at - created_at)) * 1000) || ' '
              || count(*) FILTER (WHERE started_at - created_at > interval '2 s')
         FROM bgexec.job WHERE queue = '$1'"
}
all_done() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = '$1' AND status <> 'completed'") == 0 ]]; }

# 1. Jobs of b1: the worker of b1..b40 is woken for each (2 s: four
#    hundred times a wake's pickup, under half the poll).  Before, most of
#    the 30 waited for its poll, seconds each.
read -r max slow <<<"$(spaced_pickups b1 30 0.2)"
echo "# 30 jobs of b1 among workers of 40 queues each: slowest pickup ${max} ms, ${slow} over 2 s"
((slow == 0)) || fail "$slow of 30 jobs of b1 waited over 2 s (slowest ${max} ms): their wakes went to workers of a1..a40"
# 2. Jobs of a17: the workers of a1..a40 are woken for their own queues.
read -r max slow <<<"$(spaced_pickups a17 30 0.2)"
echo "# 30 jobs of a17: slowest pickup ${max} ms, ${slow} over 2 s"
((slow == 0)) || fail "$slow of 30 jobs of a17 waited over 2 s (slowest ${max} ms)"
for p in "$PID_a1" "$PID_a2" "$PID_a3" "$PID_b1"; do kill -0 "$p" || fail "worker $p died"; done
ok

#!/usr/bin/env bash
# `bgexec bench` runs end to end on a fresh cluster, every phase and the
# scaling mode at a small size, with two rounds of reference, enqueue and
# drain: its JSON carries each figure (and each round's, the headline being
# their median), the exactly-once checks find nothing missing or duplicated, the drain's CPU is
# accounted (workers by rusage, their backends through /proc: this cluster is
# local), and the bench leaves no job behind, nor takes anyone else's (a
# queue named bench-mine).  Timing is not checked.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57953
mine=$(sql "SELECT bgexec.submit('noop', queue => 'bench-mine')")

"$BGEXEC" bench --jobs 3000 --rounds 2 --concurrency 8 --pickup-jobs 30 --pickup-gap-ms 2 --ref-seconds 1 \
  --scaling --history 3000 --backlog 500 --claim-iterations 100 --scaling-jobs 300 --scaling-workers 1,4 \
  --json "$E2E_DIR/bench.json" >"$E2E_DIR/bench.log" 2>&1 || fail "bench exit code $?"
j="$E2E_DIR/bench.json"

for f in reference_update_tps enqueue_jobs_per_s drain_jobs_per_s pickup_ms.p50 pickup_ms.p99 \
  commits_per_job wal_bytes_per_job drain_cpu_us_per_job.workers drain_cpu_us_per_job.backends \
  worker_rss.idle_rss_kib scaling.empty.claim.claim_p99_ms scaling.loaded.claim.claim_p99_ms \
  pickup_reference_commit_ms.p50 pickup_reference_commit_ms.p99 pickup_p50_over_commit_p50; do
  jq -e ".$f > 0" "$j" >/dev/null || fail "$f is not a positive number: $(jq -c ".$f" "$j")"
done
jq -e '.rounds | length == 2 and all(.drain_jobs_per_s > 0 and .reference_update_tps > 0
  and .drain_over_reference > 0 and .missing == 0 and .duplicates == 0)' "$j" >/dev/null \
  || fail "rounds: $(jq -c .rounds "$j")"
jq -e '([.rounds[].drain_jobs_per_s] | add / 2 | round) as $m | .drain_jobs_per_s == $m' "$j" >/dev/null \
  || fail "drain_jobs_per_s is not the median of the rounds: $(jq -c '{drain_jobs_per_s, r: [.rounds[].drain_jobs_per_s]}' "$j")"
jq -e '.exactly_once.drain.jobs == 6000 and .exactly_once.drain.completed == 6000' "$j" >/dev/null \
  || fail "exactly_once.drain: $(jq -c .exactly_once.drain "$j")"
jq -e '.drain_host_cpu_busy > 0 and .drain_host_cpu_busy <= 1' "$j" >/dev/null \
  || fail "drain_host_cpu_busy: $(jq -c .drain_host_cpu_busy "$j")"
jq -e '.missing == 0 and .duplicates == 0' "$j" >/dev/null || fail "exactly-once: $(jq -c '{missing, duplicates}' "$j")"
jq -e '[.scaling.empty.drain[], .scaling.loaded.drain[]] | length == 4 and all(.missing == 0 and .duplicates == 0)' \
  "$j" >/dev/null || fail "scaling drains: $(jq -c '[.scaling[].drain[]]' "$j")"
jq -e '.scaling.trickle | length == 2 and all(.jobs == 30 and .commits_per_job > 0 and .pickup_p50_ms > 0
  and .missing == 0 and .duplicates == 0)' "$j" >/dev/null || fail "scaling trickle: $(jq -c .scaling.trickle "$j")"
[[ $(sql "SELECT count(*) FROM pg_tables WHERE tablename ~ '^bench_(ref|commit)_'") == 0 ]] \
  || fail "the bench left a scratch table behind"
grep -q "drain / reference" "$E2E_DIR/bench.log" || fail "no table printed"
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue ~ '^bench-[0-9]+-'") == 0 ]] || fail "the bench left jobs behind"
[[ $(sql "SELECT status FROM bgexec.job WHERE id = $mine") == queued ]] || fail "the bench deleted a user's job in queue bench-mine"
ok

#!/usr/bin/env bash
# A step's large output costs the worker one copy of it, and the worker
# hands the memory back when the job ends.  A sql step returning 1.5
# million one-column rows (15 MB as JSON, under the step's 16 MiB) is about
# 250 MB as the worker's JSON values; the worker copied them for the mask,
# the event, the kept output, the event's mask and the finish batch (1.1 GB
# at its peak), and stayed at 1.1 GB after the job.  Bounds: a peak under
# 640 MiB, and under 128 MiB of RSS once the job has ended.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57994

# A lease of 30 s (past start_worker's 2 s, for tests of lost leases): the
# event and the finish carry 15 MB each.
start_worker w1 --queue big --concurrency 2 --lease 30
pid=$WORKER_PID
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "rows", "sql": "SELECT 1 AS a FROM generate_series(1, 1500000)"}]}' --queue big) \
  || fail "submit"
wait_status "$id" completed 120
[[ $(sql "SELECT jsonb_array_length(result->'rows') FROM bgexec.job WHERE id = $id") == 1500000 ]] \
  || fail "the result: $(sql "SELECT octet_length(result::text), left(error::text, 200) FROM bgexec.job WHERE id = $id")"
kib() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/status"; }
peak=$(kib VmHWM)
((peak < 640 * 1024)) || fail "the worker's peak RSS was $peak KiB"
# The job is over once its finish is written; its memory goes when the
# worker drops it, a moment later.
small() { (($(kib VmRSS) < 128 * 1024)); }
wait_for 10 small || fail "the worker holds $(kib VmRSS) KiB after the job (peak $peak KiB)"
ok "peak $peak KiB, after $(kib VmRSS) KiB"

#!/usr/bin/env bash
# A completed step's output is kept only while a step still to run reads it
# (its templates name it) or it is part of the job's result.  The worker
# held every step's output to the job's end, twice for text (as its stdout
# and as its output): this chain of 14 steps printing 12 MiB each peaked
# at 429 MiB, against 97 MiB now.  Bound: a peak under 192 MiB.  The last
# step reads the first's output, 15 steps back, so an output still to be
# read is kept; and the job's result is the last step's.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57989

start_worker w1 --queue big --allow-run --lease 30
pid=$WORKER_PID
cat >"$E2E_DIR/big.sh" <<'SH'
#!/bin/sh
head -c 12582912 /dev/zero | tr '\0' a
SH
chmod +x "$E2E_DIR/big.sh"
steps='{"id": "s0", "run": ["echo", "{\"n\": 7}"]}'
prev=s0
for i in $(seq 1 14); do
  steps+=", {\"id\": \"s$i\", \"needs\": [\"$prev\"], \"run\": [\"$E2E_DIR/big.sh\"]}"
  prev=s$i
done
steps+=", {\"id\": \"last\", \"needs\": [\"$prev\"], \"run\": [\"echo\", \"n={{steps.s0.output.n}}\"]}"
id=$("$BGEXEC" submit workflow "{\"steps\": [$steps]}" --queue big) || fail "submit"
wait_status "$id" completed 180
[[ $(sql "SELECT result->>'last' FROM bgexec.job WHERE id = $id") == "n=7" ]] \
  || fail "the result: $(sql "SELECT left(result::text, 200), left(error::text, 300) FROM bgexec.job WHERE id = $id")"
[[ $(sql "SELECT length(data->>'output') FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_completed' AND data->>'step' = 's7'") == 12582912 ]] \
  || fail "s7's step_completed does not carry its 12 MiB output"
peak=$(awk '$1 == "VmHWM:" { print $2 }' "/proc/$pid/status")
((peak < 192 * 1024)) || fail "the worker's peak RSS was $peak KiB"
ok "peak $peak KiB"

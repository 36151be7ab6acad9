#!/usr/bin/env bash
# A step output of many small JSON values is written with one parse on the
# server.  The worker called append_event, which built the one-event array
# with jsonb_build_array and jsonb_build_object, each taking the data apart
# value by value: 5 million empty objects (15 MB) took the backend to 10 GB
# and 28 s, past a 10 s lease.  It now sends append_events the array as
# text.  Here a million: the control connection's backend peaked at about
# 2 GB before, 0.7 GB now; bound 1.3 GB.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57986
start_worker w1 --allow-run --lease 30
cat >"$E2E_DIR/objs.py" <<'PY'
import sys
sys.stdout.write('[' + '{},' * 999999 + '{}]\n')
PY
id=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"a\", \"run\": [\"python3\", \"$E2E_DIR/objs.py\"]}]}") || fail submit
wait_status "$id" completed 120
[[ $(sql "SELECT jsonb_array_length(data->'output') FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_completed'") == 1000000 ]] \
  || fail "the step_completed event does not carry the output"
hwm=$(sql "SELECT (regexp_match(pg_read_file('/proc/' || pid || '/status'), 'VmHWM:\s+(\d+)'))[1]
           FROM pg_stat_activity WHERE application_name = 'bgexec worker control'")
[[ -n $hwm ]] || fail "no control connection"
((hwm < 1300 * 1024)) || fail "the control connection's backend peaked at $hwm KiB"
ok "the control connection's backend peaked at $hwm KiB"

#!/usr/bin/env bash
# A step output of many small JSON values costs the backends one parse, not
# a rebuild of every value.
# - The worker called append_event, which built the one-event array with
#   jsonb_build_array and jsonb_build_object, each taking the data apart
#   value by value: 5 million empty objects (15 MB) took the backend to
#   10 GB and 28 s, past a 10 s lease.  It now sends append_events the array
#   as text.  Here a million: the control connection's backend peaked at
#   about 2 GB before, 0.7 GB now; bound 1.3 GB.
# - The job's terminal event {"result": ...} was built by jsonb_build_object
#   the same way: the finish connection's backend peaked at 1.4 GB before,
#   0.8 GB now (the parse of the finish's items); bound 1.1 GB.
# - _completed_steps (every claim of a resumed job) gathered the outputs
#   with jsonb_object_agg: 1.3 GB before, 72 MB now; bound 300 MB.
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
hwm=$(sql "SELECT (regexp_match(pg_read_file('/proc/' || pid || '/status'), 'VmHWM:\s+(\d+)'))[1]
           FROM pg_stat_activity WHERE application_name = 'bgexec worker finish'")
[[ -n $hwm ]] || fail "no finish connection"
((hwm < 1100 * 1024)) || fail "the finish connection's backend peaked at $hwm KiB"
[[ $(sql "SELECT jsonb_array_length(result->'a') = 1000000 AND data->'result' = result
            FROM bgexec.job j JOIN bgexec.job_event e ON e.job_id = j.id AND e.kind = 'completed'
           WHERE j.id = $id") == t ]] || fail "the job or its completed event does not carry the result"
ok "the finish connection's backend peaked at $hwm KiB"
out=$(psql -qXAt -c "SELECT jsonb_array_length(bgexec._completed_steps($id)->'a')" \
                -c "SELECT (regexp_match(pg_read_file('/proc/' || pg_backend_pid() || '/status'), 'VmHWM:\s+(\d+)'))[1]")
[[ ${out%%$'\n'*} == 1000000 ]] || fail "_completed_steps does not carry the output: ${out%%$'\n'*}"
hwm=${out##*$'\n'}
((hwm < 300 * 1024)) || fail "_completed_steps took its backend to $hwm KiB"
ok "_completed_steps took its backend to $hwm KiB"

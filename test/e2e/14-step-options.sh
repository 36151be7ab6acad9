#!/usr/bin/env bash
# A step's own options: "env" reaches run and action step processes
# (templates and secrets expanded, secrets masked, the worker's BGEXEC_*
# variables kept).
source "$(dirname "$0")/lib.sh"
e2e_cluster 57954
SECRET=s3cr3t-env-$RANDOM$RANDOM
cat >"$E2E_DIR/show-env.sh" <<'SH'
#!/bin/sh
# action: prints two variables of its environment as JSON
cat >/dev/null
printf '{"color": "%s", "job": "%s"}\n' "$COLOR" "$BGEXEC_JOB_ID"
SH
chmod +x "$E2E_DIR/show-env.sh"
mkdir -p "$E2E_DIR/seen"; chmod 777 "$E2E_DIR/seen"
E2E_OVERRIDDEN=from-worker BGEXEC_SECRET_TOKEN=$SECRET \
  start_worker w1 --allow-run --action "show-env=$E2E_DIR/show-env.sh"

# env: templates like args (a lone template of a number passes its JSON
# text), a secret reaches the process but is masked in its output, the step
# overrides the worker's environment, the worker's BGEXEC_* stay its own.
id=$("$BGEXEC" submit workflow "{\"input\": {\"who\": \"world\", \"n\": 3}, \"steps\": [
  {\"id\": \"first\", \"run\": [\"sh\", \"-c\", \"echo hi\"]},
  {\"id\": \"vars\", \"needs\": [\"first\"], \"run\": [\"sh\", \"-c\",
    \"printf '%s|%s|%s|%s|%s' \\\"\$GREETING\\\" \\\"\$N\\\" \\\"\$E2E_OVERRIDDEN\\\" \\\"\$BGEXEC_STEP_ID\\\" \\\"\$FROM_STEP\\\"; echo \\\"\$TOKEN\\\" > $E2E_DIR/seen/token; echo \\\"token=\$TOKEN\\\" >&2\"],
   \"env\": {\"GREETING\": \"hello {{input.who}}\", \"N\": \"{{input.n}}\", \"E2E_OVERRIDDEN\": \"by-step\",
           \"FROM_STEP\": \"{{steps.first.stdout}}\", \"TOKEN\": \"{{secrets.TOKEN}}\"}},
  {\"id\": \"act\", \"action\": \"show-env\", \"env\": {\"COLOR\": \"blue\"}}]}") || fail submit
wait_status "$id" completed 20
[[ $(sql "SELECT result->>'vars' FROM bgexec.job WHERE id = $id") == "hello world|3|by-step|vars|hi" ]] \
  || fail "run step env: $(sql "SELECT result FROM bgexec.job WHERE id = $id")"
[[ $(sql "SELECT result->'act'->>'color' FROM bgexec.job WHERE id = $id") == blue ]] || fail "action step env"
[[ $(sql "SELECT result->'act'->>'job' FROM bgexec.job WHERE id = $id") == "$id" ]] || fail "BGEXEC_JOB_ID next to env"
[[ $(cat "$E2E_DIR/seen/token") == "$SECRET" ]] || fail "the secret did not reach the step through env"
[[ $(sql "SELECT data->'lines'->>0 FROM bgexec.job_event WHERE job_id = $id AND kind = 'log' AND data->>'stream' = 'stderr'") \
   == "token=***" ]] || fail "a secret passed in env is not masked"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND data::text LIKE '%$SECRET%'") == 0 ]] \
  || fail "a secret passed in env reached the database"

# env cannot set the worker's own variables: the step fails naming it.
bad=$("$BGEXEC" submit workflow '{"steps": [{"id": "x", "run": ["true"], "env": {"BGEXEC_JOB_ID": "7"}}]}')
wait_status "$bad" failed 20
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $bad") == "env cannot set BGEXEC_JOB_ID: the worker sets it for every step process" ]] \
  || fail "env setting BGEXEC_JOB_ID: $(sql "SELECT error FROM bgexec.job WHERE id = $bad")"
[[ $(sql "SELECT error->>'step' FROM bgexec.job WHERE id = $bad") == x ]] || fail "the error names the step"
kill -0 "$PID_w1" || fail "worker died"
ok

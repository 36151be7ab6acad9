#!/usr/bin/env bash
# A step's own options: "env" reaches run and action step processes
# (templates and secrets expanded, secrets masked, the worker's BGEXEC_*
# variables kept); "timeout" ends a run, sql or sleep step that overruns it
# (a process as a stop does: TERM, then KILL) and fails the job with
# reason step_timeout, retryable.  A descendant that left its step's
# process group (setsid) is killed when the step ends, however it ends.
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
cat >"$E2E_DIR/detach.sh" <<SH
#!/bin/sh
# action: leaves a child outside its process group holding stdin, reads
# nothing of its input, and exits
# (an asynchronous list's stdin is /dev/null unless redirected: via fd 3)
exec 3<&0
setsid sleep 300 <&3 >/dev/null 2>&1 3<&- &
exec 3<&-
until [ \$(ps -o sid= -p \$!) = \$! ]; do sleep 0.05; done
echo \$! >> $E2E_DIR/detached
echo '{"left": true}'
SH
chmod +x "$E2E_DIR/detach.sh"
cat >"$E2E_DIR/chain.sh" <<SH
#!/bin/sh
# run: leaves a detached shell with a child in its process group and one in
# a session of its own, then waits
setsid sh -c 'echo \$\$ >> $E2E_DIR/chain; sleep 300 & echo \$! >> $E2E_DIR/chain
              setsid sleep 300 & echo \$! >> $E2E_DIR/chain; wait' &
sleep 300
SH
chmod +x "$E2E_DIR/chain.sh"
mkdir -p "$E2E_DIR/seen"; chmod 777 "$E2E_DIR/seen"
# --lease 10 (past start_worker's 2 s): nothing here is about leases, and a
# heartbeat stalled on this shared machine's disk must not abandon a job.
E2E_OVERRIDDEN=from-worker BGEXEC_SECRET_TOKEN=$SECRET \
  start_worker w1 --allow-run --action "show-env=$E2E_DIR/show-env.sh" --action "detach=$E2E_DIR/detach.sh" --lease 10
# detach_to FILE: shell words that start `setsid sleep 300` in the
# background and append its pid to FILE once it has left the step's process
# group (before, the group's SIGKILL at the step's end would catch it).
detach_to() { echo "setsid sleep 300 & until [ \$(ps -o sid= -p \$!) = \$! ]; do sleep 0.05; done; echo \$! >> $1"; }
# gone PID: no such process, or a zombie (it runs no more).
gone() { local st; st=$(ps -o stat= -p "$1") || return 0; [[ $st == *Z* ]]; }
# all_gone FILE WHAT: every PID in FILE is gone within 5 s.
all_gone() {
  local pid
  while read -r pid; do
    wait_for 5 gone "$pid" || fail "$2: process $pid still runs: $(ps -o pid=,stat=,args= -p "$pid")"
  done <"$1"
}

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

# env cannot set the worker's own variables: submit refuses it, and a job
# whose payload says so anyway (written past submit, as bad data from the
# database would be) fails its step naming it, never the worker.
"$BGEXEC" submit workflow '{"steps": [{"id": "x", "run": ["true"], "env": {"BGEXEC_JOB_ID": "7"}}]}' 2>/dev/null \
  && fail "submit accepted an env setting BGEXEC_JOB_ID"
bad=$("$BGEXEC" submit workflow '{"steps": [{"id": "x", "run": ["true"], "env": {"OK": "7"}}]}' --run-after +1h)
sql "UPDATE bgexec.job SET payload = jsonb_set(payload, '{steps,0,env}', '{\"BGEXEC_JOB_ID\": \"7\"}'),
            run_after = now() WHERE id = $bad" >/dev/null
wait_status "$bad" failed 20
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $bad") == "env cannot set BGEXEC_JOB_ID: the worker sets it for every step process" ]] \
  || fail "env setting BGEXEC_JOB_ID: $(sql "SELECT error FROM bgexec.job WHERE id = $bad")"
[[ $(sql "SELECT error->>'step' FROM bgexec.job WHERE id = $bad") == x ]] || fail "the error names the step"
# ... nor an env on a sql step, nor a timeout on an approval: each fails
# its step, as submit refuses it (they were ignored: the sql step ran and
# completed, the approval suspended the job without its timeout).
past_submit() {  # STEP-JSON PATH VALUE: the message the job failed with (or its status)
  local j
  j=$("$BGEXEC" submit workflow "{\"steps\": [$1]}" --run-after +1h) || { echo "submit failed"; return; }
  sql "UPDATE bgexec.job SET payload = jsonb_set(payload, '$2', '$3'), run_after = now() WHERE id = $j" >/dev/null
  ended() { [[ $(job_status "$j") != @(queued|running) ]]; }
  wait_for 20 ended
  sql "SELECT status || ' ' || coalesce(error->>'step' || ': ' || (error->>'message'), '') FROM bgexec.job WHERE id = $j"
}
got=$(past_submit '{"id": "q", "sql": "SELECT 1 AS one"}' '{steps,0,env}' '{"X": "1"}')
[[ $got == 'failed q: "env" is only allowed with "run" or "action"' ]] || fail "env on a sql step: $got"
got=$(past_submit '{"id": "ok", "approval": {"prompt": "go?"}}' '{steps,0,timeout}' '1')
[[ $got == 'failed ok: "timeout" is not allowed with "approval"' ]] || fail "timeout on an approval: $got"
# an "if" that is text, no template, is said to be so (it read '"if" true
# is "true", not true or false')
got=$(past_submit '{"id": "w", "run": ["true"]}' '{steps,0,if}' '"true"')
[[ $got == 'failed w: step w: "if" must be true, false or one template, not "true"' ]] || fail "if text: $got"
# text after its template is no one template either (submit refuses it too)
got=$(past_submit '{"id": "w", "run": ["true"]}' '{steps,0,if}' '"{{input.go}} == true"')
[[ $got == 'failed w: step w: "if" must be true, false or one template, not "{{input.go}} == true"' ]] \
  || fail "if text after a template: $got"
# timeout: a process that ignores TERM is killed (kill grace 0.5 s) soon
# after its 1 s; the job fails with an error naming the step and the timeout.
# Without the timeout, or the KILL, its sleeps hold it for 30 s.
P=$E2E_DIR/pids
E2E_PIDFILES+=("$P")
start=$(date +%s%N)
slow=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"slow\", \"timeout\": 1, \"run\": [\"sh\", \"-c\",
  \"echo \$\$ >> $P; trap '' TERM; sleep 30 & sleep 30 & wait\"]}]}") || fail submit
wait_status "$slow" failed 20
ms=$((($(date +%s%N) - start) / 1000000))
echo "# run step failed ${ms} ms after submit" >&2
((ms < 15000)) || fail "the run step's timeout ended it after ${ms} ms"
[[ $(sql "SELECT error FROM bgexec.job WHERE id = $slow") == \
   '{"step": "slow", "reason": "step_timeout", "message": "step slow timed out after 1 s", "retryable": true}' ]] \
  || fail "run step timeout error: $(sql "SELECT error FROM bgexec.job WHERE id = $slow")"
[[ $(sql "SELECT data->'error'->>'reason' FROM bgexec.job_event WHERE job_id = $slow AND kind = 'step_failed'") == step_timeout ]] \
  || fail "step_failed event of the timed-out step"
pgid=$(head -1 "$P")
wait_for 5 bash -c "! pgrep -g $pgid" || fail "processes left in the timed-out step's group: $(pgrep -g "$pgid" | tr '\n' ' ')"

# A descendant that left the step's process group (setsid) and holds its
# stdout open: the step waited for that EOF for ever, past any timeout or
# stop.  Once the leader has exited the outputs get a second, then are
# closed: a finished leader completes its step, a timed-out one fails it.
# The worker, their subreaper, kills such descendants when their step ends
# (they outlived the step, its job and the worker).
D=$E2E_DIR/detached
E2E_PIDFILES+=("$D" "$D-done" "$D-late")
det=$("$BGEXEC" submit workflow "{\"steps\": [
  {\"id\": \"done\", \"run\": [\"sh\", \"-c\", \"$(detach_to "$D-done"); echo started\"]},
  {\"id\": \"late\", \"timeout\": 1, \"run\": [\"sh\", \"-c\", \"$(detach_to "$D-late"); sleep 300\"]}]}") \
  || fail submit
wait_status "$det" failed 15
[[ $(sql "SELECT data->>'output' FROM bgexec.job_event WHERE job_id = $det AND kind = 'step_completed' AND data->>'step' = 'done'") == started ]] \
  || fail "a step whose detached child holds stdout did not complete: $(sql "SELECT kind, data FROM bgexec.job_event WHERE job_id = $det")"
[[ $(sql "SELECT error->>'reason' FROM bgexec.job WHERE id = $det") == step_timeout ]] \
  || fail "a timed-out step whose detached child holds stdout: $(sql "SELECT error FROM bgexec.job WHERE id = $det")"
all_gone "$D-done" "the detached child of a completed step"
all_gone "$D-late" "the detached child of a timed-out step"
# The same with stdin: an action that reads none of its 200 KB input and
# leaves a detached child holding stdin; the write of the rest never ended.
head -c 200000 /dev/zero | tr '\0' x >"$E2E_DIR/big.txt"
jq -cn --rawfile big "$E2E_DIR/big.txt" '{steps: [{id: "d", action: "detach", with: {big: $big}}]}' >"$E2E_DIR/big.json"
det_in=$("$BGEXEC" submit workflow @"$E2E_DIR/big.json") || fail submit
wait_status "$det_in" completed 15
all_gone "$D" "the detached child of an action holding its stdin"

# A stop kills a detached descendant and what it started: its child in its
# group, and its child in another session, which comes to the worker only
# when the first dies.
C=$E2E_DIR/chain
E2E_PIDFILES+=("$C")
chain=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"c\", \"run\": [\"$E2E_DIR/chain.sh\"]}]}") || fail submit
wait_for 20 bash -c "[[ \$(wc -l < $C) == 3 ]]" || fail "the detached chain did not start"
"$BGEXEC" stop "$chain" >/dev/null || fail stop
wait_status "$chain" cancelled 10
all_gone "$C" "a detached chain of a stopped job"

# While its step runs, a detached descendant lives, even adopted by the
# worker (its parent, a subshell, exited) when another step's end makes the
# worker look: it carries its step's BGEXEC_* variables.  So does one
# without them (env -i), while any step runs.  Both die with their step.
# (keep runs 6 s: its checks, after tick's 1 s, have 5 s to see it running.)
K=$E2E_DIR/kept
E2E_PIDFILES+=("$K" "$K-bare")
kept=$("$BGEXEC" submit workflow "{\"steps\": [
  {\"id\": \"keep\", \"run\": [\"sh\", \"-c\",
    \"(setsid sleep 300 & echo \$! >> $K); (env -i PATH=\$PATH setsid sleep 300 & echo \$! >> $K-bare); sleep 6\"]},
  {\"id\": \"tick\", \"run\": [\"sleep\", \"1\"]}]}") || fail submit
wait_for 10 bash -c "[[ \$(psql -qXAt -c \"SELECT count(*) FROM bgexec.job_event WHERE job_id = $kept
  AND kind = 'step_completed' AND data->>'step' = 'tick'\") == 1 ]]" || fail "step tick did not complete"
[[ $(job_status "$kept") == running ]] || fail "step keep ended early: $(job_status "$kept")"
for f in "$K" "$K-bare"; do
  pid=$(cat "$f")
  ! gone "$pid" || fail "a detached child ($f) of a running step was killed"
done
wait_status "$kept" completed 20
all_gone "$K" "the detached child of a step that ran past another's end"
all_gone "$K-bare" "a detached child without BGEXEC_* variables once no step runs"

# A sql step past its timeout is cancelled (nothing left running on the
# server); a sleep step is cut short.  Both fail the same way.
q=$("$BGEXEC" submit workflow '{"steps": [{"id": "q", "timeout": 0.5, "sql": "SELECT pg_sleep(30)"}]}')
z=$("$BGEXEC" submit workflow '{"steps": [{"id": "z", "timeout": 1, "sleep": 30}]}')
wait_status "$q" failed 10
wait_status "$z" failed 10
[[ $(sql "SELECT error->>'message' || ' ' || (error->>'reason') FROM bgexec.job WHERE id = $q") == "step q timed out after 0.5 s step_timeout" ]] \
  || fail "sql step timeout error: $(sql "SELECT error FROM bgexec.job WHERE id = $q")"
[[ $(sql "SELECT error->>'message' || ' ' || (error->>'reason') FROM bgexec.job WHERE id = $z") == "step z timed out after 1 s step_timeout" ]] \
  || fail "sleep step timeout error: $(sql "SELECT error FROM bgexec.job WHERE id = $z")"
wait_for 5 bash -c "[[ \$(psql -qXAt -c \"SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)' AND state = 'active'\") == 0 ]]" \
  || fail "the timed-out sql statement still runs"

# A step within its timeout completes; a timed-out step is retryable: with
# attempts left the job is queued again.
fine=$("$BGEXEC" submit workflow '{"steps": [{"id": "f", "timeout": 30, "run": ["sh", "-c", "echo done"]}, {"id": "s", "timeout": 30, "sleep": 0.1}]}')
wait_status "$fine" completed 10
again=$("$BGEXEC" submit workflow '{"steps": [{"id": "r", "timeout": 0.2, "sleep": 5}]}' --max-attempts 2)
wait_for 10 bash -c "[[ \$(psql -qXAt -c \"SELECT count(*) FROM bgexec.job_event WHERE job_id = $again AND kind = 'retry_scheduled'\") == 1 ]]" \
  || fail "a timed-out step with attempts left was not retried"
wait_status "$again" failed 15
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $again") == 2 ]] || fail "attempts of the retried job"
# The worker reaps what it adopted: no zombie is left under it.
[[ $(ps --ppid "$PID_w1" -o stat= | grep -c Z) == 0 ]] \
  || fail "zombies under the worker: $(ps --ppid "$PID_w1" -o pid=,stat=,args=)"
kill -0 "$PID_w1" || fail "worker died"

# As a PID namespace's init (a container's first process) the worker gets
# every orphan of the namespace.  One that is no step's (a `docker exec`'s;
# here an nsenter's) is reaped when it ends, never killed; a step's
# detached child is killed as anywhere.  (--kill-child: the namespace,
# and all in it, ends with unshare.)
if ! unshare --pid --fork --mount-proc true 2>/dev/null; then
  echo "# skipped: this machine gives no PID namespace (unshare --pid)"
else
  unshare --pid --fork --mount-proc --kill-child "$BGEXEC" worker --id ns1 --lease 10 --queue ns --allow-run \
    >>"$E2E_DIR/ns1.log" 2>&1 &
  E2E_PIDS+=("$!")
  unshared=$!
  wait_for 10 pgrep -P "$unshared" || fail "the worker in its PID namespace did not start"
  ns_worker=$(pgrep -P "$unshared")
  wait_for 10 grep -q 'msg=listening' "$E2E_DIR/ns1.log" || fail "the worker in its PID namespace did not listen"
  nsenter -t "$ns_worker" -p -m -- sh -c 'setsid sleep 311 >/dev/null 2>&1 < /dev/null &'
  wait_for 5 pgrep -f '^sleep 311$' || fail "the namespace's stray process did not start"
  stray=$(pgrep -f '^sleep 311$')
  wait_for 5 bash -c "[[ \$(ps -o ppid= -p $stray) -eq $ns_worker ]]" \
    || fail "the stray process did not come to the namespace's init: $(ps -o pid=,ppid=,args= -p "$stray")"
  ns_job=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"d\", \"run\": [\"sh\", \"-c\",
    \"setsid sleep 312 >/dev/null 2>&1 </dev/null & until [ \$(ps -o sid= -p \$!) = \$! ]; do sleep 0.05; done; echo started\"]}]}" --queue ns) || fail submit
  wait_status "$ns_job" completed 15
  wait_for 5 bash -c "! pgrep -f '^sleep 312$'" || fail "a step's detached child in the namespace still runs"
  sleep 0.5
  ! gone "$stray" || fail "the worker as the namespace's init killed a process that is no step's"
  kill "$stray"
  wait_for 5 bash -c "! ps -p $stray >/dev/null" || fail "the namespace's init left its stray process a zombie: $(ps -o pid=,stat=,args= -p "$stray")"
  kill -0 "$ns_worker" || fail "the worker in its PID namespace died"
fi

# A sleep template's value outside what submit takes for a literal (0 to
# 100 years, or a duration) fails the step naming the template and its
# value, not retried: one over 100 years slept until a stop, and the
# error named neither.
for d in '"1h1m"' '1e300'; do
  j=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"z\", \"sleep\": \"{{input.d}}\"}], \"input\": {\"d\": $d}}") \
    || fail submit
  wait_status "$j" failed 20
  msg=$(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $j")
  [[ $msg == *'"sleep" {{input.d}} is '*', not seconds from 0 to 3110400000 (100 years)'* ]] \
    || fail "sleep $d: $msg"
done
# A second signal exits at once and kills every step's processes, a
# detached descendant the worker adopted too.
F=$E2E_DIR/fatal
E2E_PIDFILES+=("$F")
"$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"f\", \"run\": [\"sh\", \"-c\",
  \"(setsid sleep 300 & echo \$! >> $F); sleep 300\"]}]}" >/dev/null || fail submit
wait_for 10 test -s "$F" || fail "the step to be ended by a second signal did not start"
wait_for 5 bash -c "[[ \$(ps -o ppid= -p $(cat "$F")) -eq $PID_w1 ]]" \
  || fail "the worker did not adopt an orphan of its step: $(ps -o pid=,ppid=,args= -p "$(cat "$F")")"
kill -TERM "$PID_w1"
# The second once the first has been handled (two signals that arrive
# before the worker runs are one).
wait_for 20 grep -q 'msg="signal received, draining"' "$E2E_DIR/w1.log" || fail "the worker did not drain at the first signal"
# --run-after +DUR takes what --timeout takes: past the worker's forms,
# PostgreSQL's interval (`+2d` was a usage error, `--timeout 2d` was not)
j=$("$BGEXEC" submit noop --queue later --run-after +2d) || fail "--run-after +2d refused"
[[ $(sql "SELECT run_after - created_at BETWEEN '1 day 23:59' AND '2 days 00:01' FROM bgexec.job WHERE id = $j") == t ]] \
  || fail "--run-after +2d: $(sql "SELECT run_after - created_at FROM bgexec.job WHERE id = $j")"
j=$("$BGEXEC" submit noop --queue later --run-after '+1 day 2 hours') || fail "--run-after '+1 day 2 hours' refused"
[[ $(sql "SELECT run_after - created_at BETWEEN '1 day 01:59' AND '1 day 02:01' FROM bgexec.job WHERE id = $j") == t ]] \
  || fail "--run-after '+1 day 2 hours': $(sql "SELECT run_after - created_at FROM bgexec.job WHERE id = $j")"
rc=0; "$BGEXEC" submit noop --queue later --run-after +soon 2>"$E2E_DIR/err" || rc=$?
((rc == 2)) && grep -qF -- '--run-after: invalid input syntax for type interval: "soon"' "$E2E_DIR/err" \
  || fail "--run-after +soon: exit $rc: $(cat "$E2E_DIR/err")"

kill -TERM "$PID_w1"
rc=0; wait "$PID_w1" || rc=$?
((rc == 130)) || fail "the worker exited $rc after a second signal"
all_gone "$F" "a detached child after the worker's second signal"
ok

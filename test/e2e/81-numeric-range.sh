#!/usr/bin/env bash
# Numbers PostgreSQL's numeric (so jsonb) refuses, printed by a step: at most
# 131072 digits before the point and 16383 after (1e-16384 is past it; one
# past a double's range, 1e400, is no JSON to the worker already).  A
# "::progress" line holding one was a progress event the database refused,
# and took its whole batch with it (the lines around it, the valid progress):
# the worker only logged "log flush failed ... value overflows numeric
# format".  It is a log line now, as a line that is not JSON.  A step output
# holding one failed the step with the database's raw text, retryable, and
# it was retried to max_attempts; it fails for good now, saying why.  And a
# batch the database still refuses for its data (a trigger here) is written
# event by event, the event refused alone replaced by a line saying so.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57918
start_worker w1 --allow-run
# lines ID [ORDER]: its log lines, in order (or ORDER: stdout and stderr
# are read apart, so the order between them is not the step's)
lines() { sql "SELECT string_agg(l, '|' ORDER BY ${2:-seq, n}) FROM bgexec.job_event, jsonb_array_elements_text(data->'lines') WITH ORDINALITY AS t(l, n) WHERE job_id = $1 AND kind = 'log'"; }

# progress: a bad line is a log line; the batch around it is kept
id=$("$BGEXEC" submit workflow '{"steps":[{"id":"a","run":["sh","-c",
  "echo line1; echo line2 >&2; echo '\''::progress {\"pct\":10}'\'' >&2; echo '\''::progress {\"x\":1e-16384}'\'' >&2; echo line3 >&2; sleep 0.5; echo after"]}]}') \
  || fail submit
wait_status "$id" completed 30
[[ $(lines "$id" 'l COLLATE "C"') == '::progress {"x":1e-16384}|after|line1|line2|line3' ]] || fail "log lines: $(lines "$id")"
[[ $(sql "SELECT string_agg(data->>'progress', '|') FROM bgexec.job_event WHERE job_id = $id AND kind = 'progress'") == '{"pct": 10}' ]] \
  || fail "progress: $(sql "SELECT data FROM bgexec.job_event WHERE job_id = $id AND kind = 'progress'")"

# output: fails the step for good (not retried), saying why
id=$("$BGEXEC" submit workflow '{"steps":[{"id":"a","run":["echo","{\"x\":1e-16384}"]}]}' --max-attempts 3) || fail submit
wait_for 60 job_ended "$id" || fail "job $id is $(job_status "$id")"
err=$(sql "SELECT error FROM bgexec.job WHERE id = $id")
[[ $(sql "SELECT status || ' ' || attempt || ' ' || (error->>'retryable') || ' ' || (error->>'step') FROM bgexec.job WHERE id = $id") \
   == 'failed 1 false a' ]] || fail "job: $(sql "SELECT status, attempt FROM bgexec.job WHERE id = $id") $err"
[[ $err == *'holding the number 1e-16384, out of the range of PostgreSQL'*'numeric'* && $err != *overflows* ]] \
  || fail "error: $err"

# a batch refused for its data: its events one at a time
sql "CREATE FUNCTION public.refuse_marked() RETURNS trigger LANGUAGE plpgsql AS \$\$
     BEGIN IF NEW.data::text LIKE '%MARKED%' THEN RAISE invalid_parameter_value USING MESSAGE = 'marked event'; END IF;
     RETURN NEW; END \$\$;
     CREATE TRIGGER refuse_marked BEFORE INSERT ON bgexec.job_event FOR EACH ROW EXECUTE FUNCTION public.refuse_marked()" \
  || fail trigger
id=$("$BGEXEC" submit workflow '{"steps":[{"id":"a","run":["sh","-c",
  "echo one >&2; echo '\''::progress {\"pct\":50}'\'' >&2; echo MARKED >&2; echo '\''::progress {\"pct\":60}'\'' >&2; echo two >&2; sleep 0.5"]}]}') \
  || fail submit
wait_status "$id" completed 30
[[ $(lines "$id") == 'one|[bgexec: a log event could not be stored: marked event]|two' ]] || fail "log lines: $(lines "$id")"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'progress'") == 2 ]] || fail "progress lost"
kill -TERM "$PID_w1"; wait "$PID_w1" || fail "w1 exit status $?"
ok

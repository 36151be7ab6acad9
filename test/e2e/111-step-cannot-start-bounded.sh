#!/usr/bin/env bash
# A step whose own start fails for want of memory or processes (ENOMEM,
# EAGAIN: that program alone) while the worker's probe starts `true`: the
# worker gave the job back, uncounted, reopened its claims half a second
# later, claimed it again, and so on for ever: a job that never ran, never
# failed and never counted an attempt.  After 10 give-backs in a row the
# next counts the attempt (unclaim decides): the queue's retry, then
# failed at max_attempts, the error saying why.  The one program's ENOMEM
# is made by an LD_PRELOAD of the worker (spawn_enomem.c).  Each cycle also
# logged "not claiming: step processes cannot be started" and "claiming
# again" (20 pairs and more): now a pair per outage or 10 s.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58111
cc -shared -fPIC -O2 -o "$E2E_DIR/spawn_enomem.so" "$E2E_ROOT/test/e2e/spawn_enomem.c" -ldl \
  || fail "the LD_PRELOAD library did not build"
mkdir -p "$E2E_DIR/bin"
prog=$E2E_DIR/bin/bgexec-e2e-enomem
printf '#!/bin/sh\necho ran\n' >"$prog"; chmod 755 "$prog"
chmod a+rx "$E2E_DIR" "$E2E_DIR/bin"
sql "SELECT bgexec.configure_queue('q', retry_base => '100 ms', retry_cap => '100 ms')" >/dev/null
LD_PRELOAD=$E2E_DIR/spawn_enomem.so start_worker w --queue q --lease 5 --allow-run --concurrency 2
wait_for 20 grep -q 'msg=listening' "$E2E_DIR/w.log" || fail "the worker did not start"
stuck=$(sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"big\", \"run\": [\"$prog\"]}]}',
               queue => 'q', max_attempts => 2)")
wait_for 120 job_ended "$stuck" \
  || fail "the job did not end: $(sql "SELECT status, attempt FROM bgexec.job WHERE id = $stuck"),
$(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $stuck AND kind = 'retry_scheduled'") give-backs"
[[ $(sql "SELECT status || ' ' || attempt || ' ' || (error->>'reason') || ' ' || (error->>'given_back')
            || ' ' || (error->>'step') FROM bgexec.job WHERE id = $stuck") == 'failed 2 cannot_start_steps 10 big' ]] \
  || fail "the job: $(sql "SELECT status, attempt, error FROM bgexec.job WHERE id = $stuck")"
sql "SELECT error->>'message' FROM bgexec.job WHERE id = $stuck" | grep -q 'Cannot allocate memory.*11 times in a row' \
  || fail "the error does not say why: $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $stuck")"
# 10 give-backs uncounted, then a counted attempt retried; 10 more, then failed
[[ $(sql "SELECT string_agg(CASE WHEN data->'error' ? 'given_back' THEN 'C' ELSE 'g' END, '' ORDER BY seq)
            FROM bgexec.job_event WHERE job_id = $stuck AND kind = 'retry_scheduled'") == ggggggggggCgggggggggg ]] \
  || fail "the retries: $(sql "SELECT seq, data FROM bgexec.job_event WHERE job_id = $stuck AND kind = 'retry_scheduled' ORDER BY seq")"
[[ $(sql "SELECT count(*) FROM (SELECT job_id FROM bgexec.job_event GROUP BY job_id
            HAVING count(*) <> max(seq) OR min(seq) <> 1) g") == 0 ]] || fail "an event log has a gap"
# The worker claims and runs on: a job of a program that starts completes.
ran=$(sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"s\", \"run\": [\"true\"]}]}', queue => 'q')")
wait_status "$ran" completed 60
# One "not claiming" line per outage of the breaker (or every 10 s), not one
# per give-back cycle (20 and more), each with its "claiming again".
down=$(grep 'msg="not claiming: step processes cannot be started"' "$E2E_DIR/w.log" | grep -c level=warn || true)
up=$(grep 'msg="claiming again"' "$E2E_DIR/w.log" | grep -c level=info || true)
(( down >= 1 && down <= 6 && up == down )) || fail "$down not-claiming and $up claiming-again lines for 20 give-backs"
ok "failed at attempt 2 after 10 + 10 give-backs; $down not-claiming lines"

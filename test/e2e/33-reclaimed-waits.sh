#!/usr/bin/env bash
# At-most-once / single flight (invariants 2, 7): a job the database gives
# out again while this worker still runs an earlier attempt starts only once
# that attempt's processes are gone. 02-kill9's "again" case cannot fail:
# its step dies on the first SIGTERM, before the new run's step starts, so
# the ordering in Worker::start_job (wait_over) is unobserved. Here the first
# run's step ignores TERM and lives until the KILL after the grace.
# (Found by mutation testing: it failed under start_job not awaiting earlier->wait_over().)
source "$(dirname "$0")/lib.sh"
e2e_cluster 57984
M=$E2E_DIR/marks; mkdir -p "$M"; chmod 777 "$M"
E2E_PIDFILES+=("$M/rpids")
start_worker a8 --allow-run --queue rq --concurrency 2 --kill-grace 0.6
again=$("$BGEXEC" submit workflow --queue rq --max-attempts 3 "{\"steps\": [
  {\"id\": \"s\", \"run\": [\"sh\", \"-c\",
     \"echo \$\$ >> $M/rpids; if [ \$(wc -l < $M/rpids) -gt 1 ]; then kill -0 \$(head -1 $M/rpids) 2>/dev/null && echo overlap >> $M/roverlap; exit 0; fi; trap '' TERM; while :; do sleep 0.05; done\"]}]}") || fail submit
wait_for 20 test -s "$M/rpids" || fail "step did not start"
sql "UPDATE bgexec.job SET status = 'queued', lease = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE id = $again" >/dev/null
sql "SELECT bgexec._jobs_ready('rq', 1)" >/dev/null
wait_status "$again" completed 20
[[ ! -e $M/roverlap ]] || fail "the job's new run started beside its earlier run's step"
grep -q 'job claimed again while an earlier run of it is here' "$E2E_DIR/a8.log" || fail "no log line for the earlier run"
ok

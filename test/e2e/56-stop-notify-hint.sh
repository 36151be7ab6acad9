#!/usr/bin/env bash
# Where bgexec is not preloaded a worker LISTENs on bgexec_stop.  PostgreSQL
# has no privileges on channels, so a role with no access to bgexec at all
# could NOTIFY bgexec_stop with another tenant's job id, and the worker
# cancelled that running job.  The notification is a hint now: the worker
# heartbeats at once, and stops the job only when the heartbeat says the
# job's stop was requested.  A real stop still ends it at once, not at the
# next heartbeat (10 s with --lease 30).
source "$(dirname "$0")/lib.sh"
e2e_cluster 57979 "shared_preload_libraries = ''"
sql "CREATE ROLE eve LOGIN" >/dev/null
start_worker w1 --allow-run --lease 30
wait_for 20 grep -q "channels=bgexec_jobs,bgexec_stop" "$E2E_DIR/w1.log" || fail "the worker does not listen on bgexec_stop"
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "long", "run": ["sleep", "60"]}]}') || fail submit
wait_status "$id" running 20
wait_for 10 grep -q "step started.*job_id=$id" "$E2E_DIR/w1.log" || fail "the step did not start"
priv=$(psql -qXAt -U eve -d postgres -c "SELECT has_schema_privilege('bgexec', 'USAGE')" 2>&1 || true)
[[ $priv == f ]] || fail "eve may use bgexec: $priv"
psql -qX -U eve -d postgres -c "NOTIFY bgexec_stop, '$id'" || fail "NOTIFY as eve"
sleep 3
[[ $(job_status "$id") == running ]] \
  || fail "a NOTIFY from a role without access ended the job: $(sql "SELECT status || ' ' || coalesce(error::text, '') FROM bgexec.job WHERE id = $id")"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind IN ('step_failed', 'cancelled')") == 0 ]] \
  || fail "the step was stopped"
ok "a bare NOTIFY bgexec_stop left the job running"
start=$(date +%s%N)
"$BGEXEC" stop "$id" >/dev/null || fail stop
wait_status "$id" cancelled 20
ms=$((($(date +%s%N) - start) / 1000000))
((ms < 5000)) || fail "a real stop took ${ms} ms (the next heartbeat, not the notification)"
ok "a real stop cancelled the job after ${ms} ms"
# Called without the preload, await_claim's error names it too (it said
# await_work, which the caller never called).
err=$(psql -qXAt -d postgres -c "SELECT * FROM bgexec.await_claim('w1', '{default}', 1, '10 ms')" 2>&1 || true)
[[ $err == *"await_work and await_claim need bgexec in shared_preload_libraries"* ]] \
  || fail "await_claim without the preload: $err"
ok "await_claim without the preload names itself"

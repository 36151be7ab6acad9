#!/usr/bin/env bash
# A finish whose reply is lost after it committed: the worker's connections
# go through a proxy that, once, forwards the finish_many carrying the job's
# result, lets the server commit it, and cuts the connection instead of
# passing the reply on.  The job is over, its lease with it: the worker
# learns so from the finish sent again on a new connection (refused) or from
# a heartbeat ("lost"), and either way says that its finish may have been
# applied, where it logged a job that completed as abandoned, its lease
# lost.  The marker is the result's own shape, `"lostfin":"LOSTFIN` (the
# final step's id, then its output): the step's events write the id and the
# output apart, so only the finish carries it.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58002

start_cut_proxy '"lostfin":"LOSTFIN' request

start_worker w1 --db "$PROXIED" --allow-run --poll 0.2
j=$("$BGEXEC" submit workflow '{"steps": [{"id": "lostfin", "run": ["echo", "LOSTFIN"]}]}')
wait_status "$j" completed 60
wait_for 20 test -f "$E2E_DIR/cut" || fail "the proxy never cut a reply (marker not seen)"
# Which line says so depends on what the worker learns first: the re-sent
# finish's refusal, or a heartbeat's "lost" (the finish ended the lease).
said() { grep -E 'finish re-sent and refused|abandoning job' "$E2E_DIR/w1.log"; }
wait_for 20 said >/dev/null || fail "the worker said nothing of its cut finish: $(grep -E 'finish|retry' "$E2E_DIR/w1.log")"
sleep 1  # the other line, if it comes
bad=$(said | grep -v 'may have been applied' || true)
[[ -z $bad ]] || fail "a line does not say the finish may have been applied: $bad"
! grep -q 'finish refused: lease no longer current' "$E2E_DIR/w1.log" \
  || fail "the re-sent finish was logged as a plain refusal"
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $j AND kind = 'completed'") == 1 ]] \
  || fail "not exactly one terminal event"
[[ $(sql "SELECT result::text FROM bgexec.job WHERE id = $j") == '{"lostfin": "LOSTFIN"}' ]] \
  || fail "result: $(sql "SELECT result::text FROM bgexec.job WHERE id = $j")"
ok "a finish whose reply was lost is said to have maybe been applied, not lost"

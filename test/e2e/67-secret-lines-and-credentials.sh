#!/usr/bin/env bash
# Invariant 8 where the mutation run of the daemon found no test: a secret
# spanning lines (a PEM key from --secrets-dir) printed to stderr is masked
# whole, no line of it stored (each log line was masked alone, and the
# stream masker before the line split was not checked); and the worker's
# own PGPASSWORD, which the README says steps never see, is not in a
# step's environment.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57937
mkdir -p "$E2E_DIR/secrets"
printf 'BEGIN-k3y-first-half-918273\nk3y-second-half-564738-END\n' >"$E2E_DIR/secrets/PEM"
chmod -R a+rX "$E2E_DIR/secrets"
PGPASSWORD=worker-db-pw-774411 start_worker w1 --allow-run --secrets-dir "$E2E_DIR/secrets"
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "p", "run": ["sh", "-c", "printf %s \"$0\" >&2", "{{secrets.PEM}}"]}]}') || fail submit
wait_status "$id" completed 20
ev=$(sql "SELECT string_agg(data::text, ' ') FROM bgexec.job_event WHERE job_id = $id")
[[ $ev != *918273* && $ev != *564738* ]] || fail "a line of the multi-line secret was stored: $ev"
ok "a secret of two lines printed by a step is masked whole"
id=$("$BGEXEC" submit workflow '{"steps": [{"id": "e", "run": ["sh", "-c", "env | grep -c PGPASSWORD || true"]}]}') || fail submit
wait_status "$id" completed 20
[[ $(sql "SELECT result->>'e' FROM bgexec.job WHERE id = $id") == 0 ]] \
  || fail "PGPASSWORD reached the step: $(sql "SELECT result FROM bgexec.job WHERE id = $id")"
ok "the worker's PGPASSWORD is not in a step's environment"

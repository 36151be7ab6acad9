#!/usr/bin/env bash
# bgexec submit with an idempotency key that an existing job holds says so,
# as the gateway's 200 {"deduplicated": true} does: stdout is still the id
# (scripts keep it), stderr names the job and the key, and --json adds
# "deduplicated": true.  Before, the CLI printed the id alone, the same as
# for a new job.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58819

first=$("$BGEXEC" submit noop --idempotency-key receipt-42 2>"$E2E_DIR/first.err") || fail "first submit"
[[ $first =~ ^[0-9]+$ ]] || fail "first submit printed: $first"
[[ ! -s $E2E_DIR/first.err ]] || fail "a new job's submit wrote to stderr: $(cat "$E2E_DIR/first.err")"

again=$("$BGEXEC" submit noop --idempotency-key receipt-42 2>"$E2E_DIR/again.err") || fail "second submit"
[[ $again == "$first" ]] || fail "second submit printed $again, not $first"
grep -qxF "bgexec submit: job $first already has idempotency key receipt-42: nothing new submitted" "$E2E_DIR/again.err" \
  || fail "second submit's stderr: $(cat "$E2E_DIR/again.err")"

j=$("$BGEXEC" submit noop --idempotency-key receipt-42 --json 2>/dev/null) || fail "--json submit"
[[ $j == "{\"deduplicated\":true,\"id\":$first}" ]] || fail "--json: $j"
j=$("$BGEXEC" submit noop --idempotency-key receipt-43 --json 2>"$E2E_DIR/new.err") || fail "--json new key"
[[ $j =~ ^\{\"id\":[0-9]+\}$ && ! -s $E2E_DIR/new.err ]] || fail "--json of a new key: $j $(cat "$E2E_DIR/new.err")"
j=$("$BGEXEC" submit noop --json) || fail "--json without a key"
[[ $j =~ ^\{\"id\":[0-9]+\}$ ]] || fail "--json without a key: $j"

[[ $(sql "SELECT count(*) FROM bgexec.job") == 3 ]] || fail "jobs: $(sql "SELECT count(*) FROM bgexec.job")"
ok "the same id, said on stderr and in --json"

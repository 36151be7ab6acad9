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

# --unique-key: the same while the key's job is active; a new job once it ended
u=$("$BGEXEC" submit noop --unique-key sync-42 2>"$E2E_DIR/u1.err") || fail "unique submit"
[[ $u =~ ^[0-9]+$ && ! -s $E2E_DIR/u1.err ]] || fail "unique submit printed: $u $(cat "$E2E_DIR/u1.err")"
again=$("$BGEXEC" submit noop --unique-key sync-42 2>"$E2E_DIR/u2.err") || fail "second unique submit"
[[ $again == "$u" ]] || fail "second unique submit printed $again, not $u"
grep -qxF "bgexec submit: job $u is active with unique key sync-42: nothing new submitted" "$E2E_DIR/u2.err" \
  || fail "second unique submit's stderr: $(cat "$E2E_DIR/u2.err")"
j=$("$BGEXEC" submit noop --unique-key sync-42 --json 2>/dev/null) || fail "--json unique submit"
[[ $j == "{\"deduplicated\":true,\"id\":$u}" ]] || fail "--json unique: $j"
"$BGEXEC" stop "$u" >/dev/null || fail "stop $u"
n=$("$BGEXEC" submit noop --unique-key sync-42 2>"$E2E_DIR/u3.err") || fail "unique submit after stop"
[[ $n =~ ^[0-9]+$ && $n != "$u" && ! -s $E2E_DIR/u3.err ]] || fail "after stop: $n $(cat "$E2E_DIR/u3.err")"
"$BGEXEC" submit noop --unique-key a --idempotency-key b >/dev/null 2>"$E2E_DIR/both.err" && fail "both keys accepted"
grep -q "idempotency_key and unique_key cannot both be given" "$E2E_DIR/both.err" || fail "both keys: $(cat "$E2E_DIR/both.err")"
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE unique_key = 'sync-42'") == 2 ]] || fail "unique jobs"
ok "--unique-key: the active job's id while it is active, a new job after"

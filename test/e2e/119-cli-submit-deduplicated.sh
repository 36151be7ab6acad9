#!/usr/bin/env bash
# bgexec submit with an idempotency key that an existing job holds says so,
# as the gateway's 200 {"deduplicated": true} does: stdout is still the id
# (scripts keep it), stderr names the job and the key, and --json adds
# "deduplicated": true.  Before, the CLI printed the id alone, the same as
# for a new job.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58819

# keyed FLAG KEY LINE: a first submit with the key creates a job (its id
# alone, nothing on stderr); the next two return it, saying LINE (%s: the
# id) on stderr, and "deduplicated" with --json.  The job's id in JOB.
keyed() {
  local flag=$1 key=$2 line=$3 again j
  JOB=$("$BGEXEC" submit noop "$flag" "$key" 2>"$E2E_DIR/k1.err") || fail "submit $flag $key"
  [[ $JOB =~ ^[0-9]+$ && ! -s $E2E_DIR/k1.err ]] || fail "submit $flag $key printed: $JOB $(cat "$E2E_DIR/k1.err")"
  again=$("$BGEXEC" submit noop "$flag" "$key" 2>"$E2E_DIR/k2.err") || fail "second submit $flag $key"
  [[ $again == "$JOB" ]] || fail "second submit $flag $key printed $again, not $JOB"
  # shellcheck disable=SC2059  # LINE is the format
  grep -qxF "$(printf "$line" "$JOB")" "$E2E_DIR/k2.err" || fail "second submit $flag $key: $(cat "$E2E_DIR/k2.err")"
  j=$("$BGEXEC" submit noop "$flag" "$key" --json 2>/dev/null) || fail "--json submit $flag $key"
  [[ $j == "{\"deduplicated\":true,\"id\":$JOB}" ]] || fail "--json $flag $key: $j"
}
keyed --idempotency-key receipt-42 "bgexec submit: job %s already has idempotency key receipt-42: nothing new submitted"

j=$("$BGEXEC" submit noop --idempotency-key receipt-43 --json 2>"$E2E_DIR/new.err") || fail "--json new key"
[[ $j =~ ^\{\"id\":[0-9]+\}$ && ! -s $E2E_DIR/new.err ]] || fail "--json of a new key: $j $(cat "$E2E_DIR/new.err")"
j=$("$BGEXEC" submit noop --json) || fail "--json without a key"
[[ $j =~ ^\{\"id\":[0-9]+\}$ ]] || fail "--json without a key: $j"

[[ $(sql "SELECT count(*) FROM bgexec.job") == 3 ]] || fail "jobs: $(sql "SELECT count(*) FROM bgexec.job")"

# --unique-key: the same while the key's job is active; a new job once it ended
keyed --unique-key sync-42 "bgexec submit: job %s is active with unique key sync-42: nothing new submitted"
u=$JOB
"$BGEXEC" stop "$u" >/dev/null || fail "stop $u"
n=$("$BGEXEC" submit noop --unique-key sync-42 2>"$E2E_DIR/u3.err") || fail "unique submit after stop"
[[ $n =~ ^[0-9]+$ && $n != "$u" && ! -s $E2E_DIR/u3.err ]] || fail "after stop: $n $(cat "$E2E_DIR/u3.err")"
"$BGEXEC" submit noop --unique-key a --idempotency-key b >/dev/null 2>"$E2E_DIR/both.err" && fail "both keys accepted"
grep -q "idempotency_key and unique_key cannot both be given" "$E2E_DIR/both.err" || fail "both keys: $(cat "$E2E_DIR/both.err")"
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE unique_key = 'sync-42'") == 2 ]] || fail "unique jobs"
ok "the same id, said on stderr and in --json; --unique-key: a new job once the active one ended"

#!/usr/bin/env bash
# One finish the database refuses (any error but a lost connection) fails
# only its own job: the batch it was written in is written again item by
# item, so the other jobs of the batch complete.  The refusal here is a
# CHECK constraint the test adds to bgexec.job, which refuses to complete a
# job whose payload says "poison" (a user's trigger or constraint would do
# the same); that job's error is then written as its failure.
# --finish-delay 2 keeps the two noop jobs' finishes in one batch.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57930

sql "ALTER TABLE bgexec.job ADD CONSTRAINT e2e_poison
       CHECK (status <> 'completed' OR NOT payload ? 'poison')" >/dev/null
ids=$(sql "SELECT string_agg(i::text, ' ' ORDER BY i) FROM bgexec.submit_many(
             '[{\"kind\": \"noop\", \"queue\": \"split\", \"payload\": {\"poison\": true}},
               {\"kind\": \"noop\", \"queue\": \"split\", \"payload\": {}}]') AS i")
read -r bad good <<<"$ids"
[[ -n $bad && -n $good ]] || fail "submit_many returned '$ids'"
start_worker w1 --queue split --concurrency 2 --finish-delay 2 --lease 30
wait_for 30 job_ended "$good" || fail "the good job is $(job_status "$good")"
wait_for 30 job_ended "$bad" || fail "the poisoned job is $(job_status "$bad")"
[[ $(job_status "$good") == completed ]] || fail "the good job is $(job_status "$good"): the poisoned one failed it"
[[ $(job_status "$bad") == failed ]] || fail "the poisoned job is $(job_status "$bad")"
[[ $(sql "SELECT error->>'message' FROM bgexec.job WHERE id = $bad") == *e2e_poison* ]] \
  || fail "the poisoned job's error does not name the constraint: $(sql "SELECT error FROM bgexec.job WHERE id = $bad")"
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $good") == 1 ]] || fail "the good job was claimed again"
grep -q 'msg="finish batch failed, finishing its items one by one".*sqlstate=23514 items=2' "$E2E_DIR/w1.log" \
  || fail "the two finishes were not written in one batch, then one by one"
ok "a refused finish failed its own job only; the other of its batch completed"

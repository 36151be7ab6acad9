#!/usr/bin/env bash
# A failing step ends its running siblings, and a sibling ended that way is
# not done: no step_completed (a sleep cut short, a process that exits 0 on
# SIGTERM), no side effect from a sibling that had not started yet, and a
# re-run runs it again.  A sibling that started in the same instant as the
# failure ran to its end, committed its effects and was recorded completed,
# and a re-run skipped it.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57968
# A lease far above the steps' times: on a loaded machine a 2 s lease was
# seen lost mid-attempt, and a job given up that way writes nothing more.
start_worker w1 --allow-run --lease 10
sql "SELECT bgexec.configure_queue('default', retry_base => '100 milliseconds', retry_cap => '100 milliseconds')" \
  >/dev/null
sql "CREATE TABLE side (x int)"

completed() { sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $1 AND kind = 'step_completed' AND data->>'step' = '$2'"; }
started() { sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $1 AND kind = 'step_started' AND data->>'step' = '$2'"; }

# a sleep and a process that exits 0 on SIGTERM, cut short by a failure,
# two attempts: each attempt runs them again
id=$("$BGEXEC" submit workflow --max-attempts 2 '{"steps": [
  {"id": "nap", "sleep": 30},
  {"id": "term0", "run": ["sh", "-c", "trap \"echo partial; exit 0\" TERM; sleep 30 & wait"]},
  {"id": "bad", "run": ["sh", "-c", "sleep 0.5; exit 1"]}]}') || fail submit
wait_status "$id" failed 30
[[ $(sql "SELECT attempt FROM bgexec.job WHERE id = $id") == 2 ]] || fail "attempts: $(sql "SELECT attempt FROM bgexec.job WHERE id = $id")"
for s in nap term0; do
  [[ $(completed "$id" $s) == 0 ]] || fail "$s, ended by a sibling's failure, recorded completed"
  [[ $(started "$id" $s) == 2 ]] || fail "$s ran $(started "$id" $s) times in two attempts: a re-run skipped it"
  # and each run of it closed with a step_failed saying why (it had a
  # step_started alone, as if still running)
  [[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed' AND data->>'step' = '$s'
            AND data->'error'->>'reason' = 'sibling_failed' AND data->'error'->>'message' = 'step $s ended: step bad failed'") == 2 ]] \
    || fail "$s: closing events $(sql "SELECT string_agg(data::text, ' ') FROM bgexec.job_event WHERE job_id = $id AND kind = 'step_failed' AND data->>'step' = '$s'")"
done
# every step_started of the job has its closing event
[[ $(sql "SELECT count(*) FILTER (WHERE kind = 'step_started') - count(*) FILTER (WHERE kind IN ('step_completed', 'step_failed'))
          FROM bgexec.job_event WHERE job_id = $id") == 0 ]] || fail "a step without a closing event"
timeout 10 "$BGEXEC" tail "$id" >"$E2E_DIR/tail.out" || true
grep -qF "ended nap: step nap ended: step bad failed" "$E2E_DIR/tail.out" || fail "tail of an ended step: $(cat "$E2E_DIR/tail.out")"
[[ $(sql "SELECT error->>'step' FROM bgexec.job WHERE id = $id") == bad ]] || fail "the job's error names another step"

# siblings that start in the same instant as the failure: nothing of theirs
# runs on (the run steps were spawned, the sql step's statement committed)
for i in 1 2 3 4 5; do
  id=$("$BGEXEC" submit workflow "{\"steps\": [
    {\"id\": \"bad\", \"run\": [\"false\"]},
    {\"id\": \"slow\", \"run\": [\"sh\", \"-c\", \"sleep 1; touch $E2E_DIR/touched$i\"]},
    {\"id\": \"write\", \"sql\": \"INSERT INTO side SELECT $i FROM pg_sleep(1)\"}]}") || fail submit
  wait_status "$id" failed 30
  for s in slow write; do
    [[ $(completed "$id" $s) == 0 ]] || fail "round $i: $s completed after its sibling failed"
  done
done
sleep 2  # what a missed sibling would still do
[[ -z $(ls "$E2E_DIR"/touched* 2>/dev/null) ]] || fail "a run step went on after its sibling failed: $(ls "$E2E_DIR"/touched*)"
[[ $(sql "SELECT count(*) FROM side") == 0 ]] || fail "a sql step committed after its sibling failed: $(sql "SELECT string_agg(x::text, ',') FROM side")"

[[ $(sql "SELECT count(*) FROM bgexec.job j WHERE (SELECT count(*) FROM bgexec.job_event e WHERE e.job_id = j.id) <> j.last_seq") == 0 ]] \
  || fail "seq gaps"
ok "a failing step ends its siblings; they run again on the next attempt"

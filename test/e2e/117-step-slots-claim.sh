#!/usr/bin/env bash
# A worker must not claim jobs it cannot start while another worker could.
# w1 runs with --concurrency 10 but one step slot (--sql-steps 1, then
# --step-processes 1); 10 one-step workflows of 2 s (timeout 10 s) are
# submitted while it is the queue's only worker, then w2 (--concurrency 10)
# joins.  Before: w1 claimed all 10 for its job slots and ran them one by one
# (20 s) while w2 sat idle; half of them ended timed_out.  After: a pool
# smaller than --concurrency bounds w1's claims (its free slots, less the
# steps waiting for one and the jobs not yet started; one more at most when
# it is full and nothing waits), so w2 gets the rest: every job completes,
# most of them on w2.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58700

# case NAME W1-FLAG STEP: the scenario on queue NAME.
case_() {
  local q=$1 flag=$2 step=$3
  start_worker "w1$q" --queue "$q" --concurrency 10 "$flag" 1 --allow-run
  wait_for 20 grep -q 'msg=listening' "$E2E_DIR/w1$q.log" || fail "w1$q did not listen"
  sql "SELECT count(bgexec.submit('workflow', '{\"steps\":[$step]}', '$q', timeout => '10 s'))
       FROM generate_series(1, 10)" >/dev/null
  wait_for 20 bash -c "[[ \$(psql -XAtc \"SELECT count(*) FROM bgexec.job WHERE queue = '$q' AND status = 'running'\") -ge 1 ]]" \
    || fail "$q: w1 claimed nothing"
  sleep 1  # (the old w1 had claimed all 10 by now)
  start_worker "w2$q" --queue "$q" --concurrency 10 --allow-run
  wait_for 60 bash -c "[[ \$(psql -XAtc \"SELECT count(*) FROM bgexec.job WHERE queue = '$q' AND status IN ('queued', 'running')\") == 0 ]]" \
    || fail "$q: jobs left after 60 s"
  local statuses on_w2
  statuses=$(sql "SELECT string_agg(status || '=' || n, ' ' ORDER BY status)
                  FROM (SELECT status, count(*) n FROM bgexec.job WHERE queue = '$q' GROUP BY 1) s")
  on_w2=$(sql "SELECT count(*) FROM bgexec.job j WHERE queue = '$q' AND
                 (SELECT e.data->>'worker' FROM bgexec.job_event e WHERE e.job_id = j.id AND e.kind = 'started'
                  ORDER BY e.seq DESC LIMIT 1) = 'w2$q'")
  [[ $statuses == "completed=10" ]] || fail "$q: $statuses (w2 ran $on_w2)"
  ((on_w2 >= 5)) || fail "$q: w2 ran $on_w2 of 10 (w1 held the rest)"
  echo "# $q: $statuses, w2 ran $on_w2" >&2
  local p1="PID_w1$q" p2="PID_w2$q"
  kill "${!p1}" "${!p2}" 2>/dev/null || true
}
case_ sqlq --sql-steps '{"id":"s","sql":"select pg_sleep(2)"}'
case_ runq --step-processes '{"id":"s","run":["sleep","2"]}'
ok "a worker with one step slot claimed no more than it could start: the idle worker ran the rest"

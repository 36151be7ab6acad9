#!/usr/bin/env bash
# The worker's log through a database outage: its claim wait broke, so it
# tries bgexec.unclaim every 0.5 s until the server is back, and each try
# wrote "unclaim failed" at warn: 35 lines in a 16 s outage.  Now one line
# every 10 s (the rest at debug, counted in the next one's held_back), and
# one "unclaim succeeds again" once the server answers, with the count.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58818
start_worker w --queue q --allow-run --concurrency 4 --lease 60
wait_for 20 grep -q 'msg=listening' "$E2E_DIR/w.log" || fail "no worker"
for i in 1 2; do
  sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"s\", \"run\": [\"sleep\", \"3\"]}]}', queue => 'q')" >/dev/null
done
n_is() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE status = '$1'") == "$2" ]]; }
wait_for 20 n_is running 2 || fail "not running"
sleep 0.5
pid=$(cat "$E2E_DIR/pg/postmaster.pid.started")
kill -QUIT "$pid"
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
sleep 14
as=(); [[ $(id -u) -eq 0 ]] && as=(runuser -u postgres --)
"${as[@]}" "$PGBIN/pg_ctl" -D "$E2E_DIR/pg/data" -l "$E2E_DIR/pg/postgres.log" -w -t 60 start >/dev/null || fail "pg back"
head -1 "$E2E_DIR/pg/data/postmaster.pid" >"$E2E_DIR/pg/postmaster.pid.started"
wait_for 60 n_is completed 2 || fail "not completed: $(sql "SELECT status, count(*) FROM bgexec.job GROUP BY 1")"
warn=$(grep 'msg="unclaim failed"' "$E2E_DIR/w.log" | grep -c 'level=warn' || true)
# 28 tries in 14 s: at 0 s and 10 s (3 for a slow start's margin)
[[ $warn -ge 1 && $warn -le 5 ]] || fail "$warn unclaim warn lines in a 14 s outage (one per 10 s; the old binary wrote one per 0.5 s)"
wait_for 10 grep -q 'msg="unclaim succeeds again"' "$E2E_DIR/w.log" \
  || fail "no recovery line: $(grep -c 'msg="unclaim failed"' "$E2E_DIR/w.log") unclaim lines"
failed=$(grep -o 'msg="unclaim succeeds again".*failed_calls=[0-9]*' "$E2E_DIR/w.log" | grep -o '[0-9]*$')
[[ $failed -ge 10 ]] || fail "the recovery line counts $failed failed calls"
# Claims as before.
late=$(sql "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"s\", \"run\": [\"true\"]}]}', queue => 'q')")
wait_status "$late" completed 30
ok "$warn unclaim warn lines in a 14 s outage, then one recovery line ($failed failed calls)"

#!/usr/bin/env bash
# A worker under a connection limit that can never fit its 4 sessions
# (control, finish, heartbeat, listen), and one waiting for slots others
# hold.  Before:
# - CONNECTION LIMIT 3: the listen and control sessions took turns being
#   refused; a claim refused at connect (53300) was taken for one whose
#   reply was lost, and bgexec.unclaim was called twice a second for ever
#   (refused too), while no claim went out: 3 jobs queued for good.
# - CONNECTION LIMIT 2: the worker gave back its sessions and took them
#   again each backoff, three log lines each time (400 in 30 s).
# - slots held by other sessions of the role: a worker with no job that
#   waited for its finish and heartbeat sessions made no heartbeat, and its
#   row in worker_stats aged (dead, to an operator, after a minute).
# After: with 3 it says so once and claims by polling; under 3 it says so
# once, holds its finish and heartbeat sessions (heartbeats go on) and
# claims nothing until the limit is raised (read again every 5 s); waiting
# for slots, it heartbeats on a session borrowed for the statement.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58312
sql "CREATE ROLE wk LOGIN CONNECTION LIMIT 3; GRANT bgexec_worker TO wk" >/dev/null
db="user=wk dbname=postgres"
lines() { grep -c "msg=\"$2" "$E2E_DIR/$1.log" || true; }
beat_age() { sql "SELECT extract(epoch FROM now() - heartbeat_at)::int FROM bgexec.worker_stats WHERE id = '$1'"; }
stop_worker() { kill -TERM "$1" && wait "$1" || true; }

# 1. CONNECTION LIMIT 3: polling, no unclaim.
start_worker a --lease 6 --db "$db"
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/a.log" || fail "worker a did not start"
ids=()
for _ in 1 2 3; do ids+=("$("$BGEXEC" submit noop)") || fail submit; done
list=$(IFS=,; echo "${ids[*]}")
done3() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE id IN ($list) AND status = 'completed'") == 3 ]]; }
wait_for 20 done3 || fail "jobs not completed under CONNECTION LIMIT 3: $(sql "SELECT string_agg(id || '=' || status, ' ') FROM bgexec.job WHERE id IN ($list)")"
sleep 5
[[ $(lines a "unclaim failed") == 0 ]] || fail "unclaim called for claims that never reached the server ($(lines a "unclaim failed") lines)"
[[ $(lines a "connection limit below the sessions a worker needs: claiming by polling") == 1 ]] \
  || fail "the limit of 3 not said once"
grep -q 'msg="connection limit below.*limit=3 limit_of="role wk.s CONNECTION LIMIT" needed=4' "$E2E_DIR/a.log" \
  || fail "the line does not name the limit and the sessions needed"
(($(lines a "not claiming") + $(lines a "claiming again") <= 2)) || fail "the claim gate flapped under limit 3"
stop_worker "$PID_a"

# 2. CONNECTION LIMIT 2: said once, settles, heartbeats go on; raised, claims.
sql "ALTER ROLE wk CONNECTION LIMIT 2" >/dev/null
start_worker b --lease 6 --db "$db"
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/b.log" || fail "worker b did not start"
j=$("$BGEXEC" submit noop) || fail submit
sleep 20
[[ $(lines b "not claiming: the connection limit is below") == 1 ]] || fail "the limit of 2 not said once: $(lines b "not claiming: the connection limit is below")"
flaps=$(($(lines b "claiming again") + $(lines b "not claiming: the server refuses") + $(lines b "notifier disconnected")))
((flaps <= 3)) || fail "the worker flapped under limit 2: $flaps lines"
[[ $(sql "SELECT status || ' ' || attempt FROM bgexec.job WHERE id = $j") == "queued 0" ]] || fail "job $j claimed under limit 2"
age=$(beat_age b)
((age <= 6)) || fail "worker b's heartbeat is $age s old while it waits under limit 2"
sql "ALTER ROLE wk CONNECTION LIMIT -1" >/dev/null
wait_status "$j" completed 30
grep -q 'msg="connection limit raised' "$E2E_DIR/b.log" || fail "no line saying the limit was raised"
stop_worker "$PID_b"

# 3. Slots held by other sessions of the role (CONNECTION LIMIT 4, three
# taken): the worker waits for its finish and heartbeat sessions, and its
# row stays live.
sql "ALTER ROLE wk CONNECTION LIMIT 4" >/dev/null
for _ in 1 2 3; do
  psql -qXAt -d "$db" -c "SELECT pg_sleep(30)" >/dev/null 2>&1 &
  E2E_PIDS+=("$!")
done
held() { [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE usename = 'wk'") == 3 ]]; }
wait_for 10 held || fail "the sleepers did not connect"
start_worker c --lease 6 --db "$db"
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/c.log" || fail "worker c did not start"
k=$("$BGEXEC" submit noop) || fail submit
for _ in 1 2 3; do
  sleep 5
  age=$(beat_age c)
  ((age <= 6)) || fail "worker c's heartbeat is $age s old while it waits for slots"
  [[ $(sql "SELECT alive FROM bgexec.worker_stats WHERE id = 'c'") == t ]] || fail "worker c not alive"
done
[[ $(job_status "$k") == queued ]] || fail "job $k is $(job_status "$k") while the worker has no finish session"
wait_status "$k" completed 40
[[ $(lines c "unclaim failed") == 0 ]] || fail "unclaim called for claims that never reached the server"
ok "limit 3 polls, limit 2 waits quietly, a worker waiting for slots stays alive"

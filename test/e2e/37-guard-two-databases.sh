#!/usr/bin/env bash
# Two workers on one host serving two databases, whose jobs have the same
# ids: when one is killed (SIGKILL, the OOM killer), its step guard stops
# its steps — found by their group and by the marker they inherit, which
# also finds a step's process that left the group — and not the other
# worker's step of the same job id, step id and attempt.  The marker held
# only those three, and the guard killed both.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57976
M=$E2E_DIR/marks
mkdir -p "$M"
chmod 777 "$M"
for db in one two; do
  psql -qX -d postgres -c "CREATE DATABASE $db" >/dev/null
  psql -qX -d "$db" -c "CREATE EXTENSION bgexec" >/dev/null
done

# The same workflow in each database: job 1, step s, attempt 1.  Its step
# records its pid and that of a process it starts in a session of its own
# (as a daemonizing program would), then waits for its database's go file.
cat >"$M/step.sh" <<'STEP'
#!/bin/sh
dir=$(dirname "$0")
echo $$ >> "$dir/$1.pids"
setsid sh -c 'echo $$ >> "$0"; exec sleep 60' "$dir/$1.pids" &
while [ ! -e "$dir/$1.go" ]; do sleep 0.05; done
STEP
chmod 755 "$M/step.sh"
E2E_PIDFILES+=("$M/one.pids" "$M/two.pids")
start_worker w1 --db "dbname=one" --allow-run --lease 10
start_worker w2 --db "dbname=two" --allow-run --lease 10
for db in one two; do
  id=$("$BGEXEC" submit workflow --db "dbname=$db" "{\"steps\": [{\"id\": \"s\", \"run\": [\"$M/step.sh\", \"$db\"]}]}")
  [[ $id == 1 ]] || fail "the job in $db is job $id, not 1"
done
two_pids() { [[ -f $M/$1.pids && $(wc -l <"$M/$1.pids") -ge 2 ]]; }
wait_for 20 two_pids one || fail "the step in database one did not start"
wait_for 20 two_pids two || fail "the step in database two did not start"
mapfile -t ones <"$M/one.pids"
mapfile -t twos <"$M/two.pids"
# The process that left w2's group: job 1, step s, attempt 1, as w1's is.
tr '\0' '\n' <"/proc/${twos[1]}/environ" | grep -qx 'BGEXEC_JOB_ID=1' || fail "the other database's step is not job 1"

kill -KILL "$PID_w1"
wait_for 10 gone "${ones[@]}" || fail "w1's step processes outlived it: ${ones[*]}"
wait_for 10 grep -q 'worker gone: its steps were stopped' "$E2E_DIR/w1.log" || fail "no guard log line"
for p in "${twos[@]}"; do
  kill -0 "$p" 2>/dev/null || fail "w1's step guard killed w2's step process $p (same job id, step and attempt)"
done
touch "$M/two.go"
status_two() { [[ $(psql -qXAt -d two -c "SELECT status FROM bgexec.job WHERE id = 1") == completed ]]; }
wait_for 20 status_two || fail "w2's job is $(psql -qXAt -d two -c "SELECT status FROM bgexec.job WHERE id = 1")"
kill -0 "$PID_w2" || fail "w2 died"
ok

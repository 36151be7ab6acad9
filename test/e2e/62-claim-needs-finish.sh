#!/usr/bin/env bash
# Invariants 1 and 7 on the worker side: a worker that cannot report back
# claims nothing.  Its role may open two connections (CONNECTION LIMIT 2):
# control and one other, so the finish, heartbeat or listen connection is
# refused (53300, too many connections for role).  The worker used to claim
# on the control connection regardless, renew the leases, and throw every
# result away when its finish could not connect: each job ended failed
# (worker_lost), and a retry-safe one was claimed by it again until its
# attempts ran out, never having run.  Now it logs that it is not claiming,
# the jobs stay queued, and once the role may connect it claims and
# completes them all.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57959
sql "CREATE ROLE wk LOGIN CONNECTION LIMIT 2; GRANT bgexec_worker TO wk" >/dev/null
start_worker climit --lease 6 --db "user=wk dbname=postgres"
wait_for 20 grep -q 'msg="worker started"' "$E2E_DIR/climit.log" || fail "worker did not start"
sleep 1
ids=()
for _ in 1 2 3 4 5; do ids+=("$("$BGEXEC" submit noop)") || fail submit; done
list=$(IFS=,; echo "${ids[*]}")
# Two leases' worth: a job claimed and lost here would have been failed by now.
# (Lease 6 s: a heartbeat call is cut at a quarter of it, and reconnecting
# under the role's limit while the cut backend is still exiting is refused;
# at 3 s one slow heartbeat on a loaded machine could lose job a below.)
sleep 12
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE id IN ($list) AND status = 'failed'") == 0 ]] \
  || fail "jobs failed while the worker could not finish them: $(sql "SELECT id, status, error FROM bgexec.job WHERE id IN ($list)")"
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE id IN ($list) AND status = 'queued' AND attempt = 0") == 5 ]] \
  || fail "jobs were claimed: $(sql "SELECT id, status, attempt FROM bgexec.job WHERE id IN ($list)")"
grep -q 'msg="not claiming: [a-z]* connection unavailable"' "$E2E_DIR/climit.log" \
  || fail "no log line saying the worker is not claiming"
kill -0 "$PID_climit" || fail "worker exited"

# The role may connect again: the worker's connections open with its
# reconnect backoff (5 s at most), and it claims and finishes every job.
sql "ALTER ROLE wk CONNECTION LIMIT -1" >/dev/null
all_completed() {
  [[ $(sql "SELECT count(*) FROM bgexec.job WHERE id IN ($list) AND status = 'completed'") == 5 ]]
}
wait_for 30 all_completed \
  || fail "jobs did not complete: $(sql "SELECT id, status, attempt, error FROM bgexec.job WHERE id IN ($list)")"
[[ $(sql "SELECT max(attempt) FROM bgexec.job WHERE id IN ($list)") == 1 ]] || fail "a job took more than one attempt"
grep -q 'msg="claiming again"' "$E2E_DIR/climit.log" || fail "no log line saying the worker claims again"

# The finish connection lost while a job waits on it: its finish is retried
# for as long as heartbeats renew the lease (it gave up at the lease of the
# claim, 6 s, and the job was lost), and the worker claims nothing more
# until the finish connection works again.  As the gate closes the worker
# gives back its listen connection; the other two (control, kept while a job
# is in flight, and heartbeat) fill the role's limit of 2: its finish
# connection cannot come back.
backends() { sql "SELECT count(*) FROM pg_stat_activity WHERE usename = 'wk'"; }
four() { [[ $(backends) == 4 ]]; }
wait_for 20 four || fail "the worker has $(backends) connections, expected 4"
sql "ALTER ROLE wk CONNECTION LIMIT 2" >/dev/null
said_before=$(grep -c 'msg="not claiming: finish connection unavailable"' "$E2E_DIR/climit.log" || true)
[[ $(sql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
          WHERE usename = 'wk' AND application_name = 'bgexec worker finish'") == 1 ]] || fail "no finish backend"
a=$("$BGEXEC" submit noop) || fail submit
# (a new such line: phase 1 may have logged one for either connection; b is
# submitted only once the gate is closed again, or the worker could claim
# it first)
unavailable() { grep -c 'msg="not claiming: finish connection unavailable"' "$E2E_DIR/climit.log" || true; }
unavailable_again() { (($(unavailable) > said_before)); }
wait_for 20 unavailable_again || fail "no log line saying the finish connection is unavailable"
# The gate's cancel of a claiming wait in flight lands within milliseconds
# of the line; a job submitted in between may still be claimed (and is
# finished later, its lease renewed meanwhile).
sleep 1
b=$("$BGEXEC" submit noop) || fail submit
sleep 9
[[ $(job_status "$a") == running ]] || fail "job $a, waiting on its finish, is $(job_status "$a")"
[[ $(sql "SELECT status || ' ' || attempt FROM bgexec.job WHERE id = $b") == "queued 0" ]] \
  || fail "job $b was claimed while the finish connection was unavailable: $(job_status "$b")"
grep -q "msg=\"abandoning job\" job_id=$a " "$E2E_DIR/climit.log" && fail "job $a was given up"
sql "ALTER ROLE wk CONNECTION LIMIT -1" >/dev/null
wait_status "$a" completed 30
wait_status "$b" completed 30
[[ $(sql "SELECT max(attempt) FROM bgexec.job WHERE id IN ($a, $b)") == 1 ]] || fail "a job took more than one attempt"
ok

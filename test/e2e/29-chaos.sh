#!/usr/bin/env bash
# Chaos: real workers run a mix of noop jobs and multi-step workflows (at-most-
# once and retry-safe, some failing once, some timing out) while, for
# CHAOS_SECONDS (default 60), workers are killed with SIGKILL and replaced
# (same id or a new one; at random, or a few ms after one of their steps
# ended, when they start the next one), frozen with SIGSTOP past their lease
# (2 s) and continued (sometimes with a new process of the same id started
# meanwhile), PostgreSQL is restarted in immediate mode (up to
# CHAOS_PG_RESTARTS, default 2), jobs are stopped and more are submitted.
# Then fresh workers drain everything (CHAOS_DRAIN s at most), all workers are
# stopped, and DESIGN.md §1 is checked against the database and the lines
# each step process wrote (job, step, attempt, its worker process; start,
# end, and whether it found its worker gone as it started):
# no job lost, exactly one terminal event matching the status, a gapless
# event log, no worker write outside its run, started events = attempt,
# at-most-once runs for max_attempts = 1, no completed step run again, no
# step alive once its job was claimed again or ended, no two runs of a job's
# steps at once, no step left running unstopped after its worker was gone,
# no step process left behind.
# The fault schedule comes from CHAOS_SEED (printed; RANDOM=seed): replay a
# failure with CHAOS_SEED=N (timing on a busy machine still varies) and
# E2E_KEEP=1 to keep the logs, marks and cluster directory; the violations
# are in violations.txt there.
source "$(dirname "$0")/lib.sh"

CHAOS_SEED=${CHAOS_SEED:-$(( ($$ * 7919 + $(date +%s)) % 32768 ))}
CHAOS_SECONDS=${CHAOS_SECONDS:-60}
CHAOS_DRAIN=${CHAOS_DRAIN:-120}        # seconds the final workers get to end every job
CHAOS_PG_RESTARTS=${CHAOS_PG_RESTARTS:-2}
RANDOM=$CHAOS_SEED
echo "# chaos seed $CHAOS_SEED, faults for ${CHAOS_SECONDS}s (replay: CHAOS_SEED=$CHAOS_SEED)" >&2

e2e_cluster 57990
M=$E2E_DIR/marks
mkdir -p "$M"
chmod 777 "$M"
: >"$M/marks"
: >"$M/pids"
: >"$E2E_DIR/expected.tsv"
: >"$E2E_DIR/workers.tsv"
: >"$E2E_DIR/stopped.tsv"
CHAOS_LOG=$E2E_DIR/chaos.log
# Steps inherit the worker's environment: how the end finds any step process
# of this test still running, whatever its pid.
export CHAOS_TAG=$E2E_DIR
# lib.sh kills the pids listed in E2E_PIDFILES at exit.  pid_max may be
# 32768 and every step forks a few processes, so the raw list would name
# reused pids (another session's processes): only those still running a
# step of ours (same pid and start time as registered) go in $M/live.
E2E_PIDFILES+=("$M/live")
declare -A FROZEN=()     # pid of a stopped worker -> second at which it is continued
declare -A ORPHAN=()     # pid of a worker whose id a newer process took (may exit 3) -> id
declare -A TOOK_BACK=()  # id an orphan took back from a newer process (which may exit 3) -> 1
live_steps() {  # prints the pids of registered step processes still alive (not zombies)
  cat "$M"/reg.* 2>/dev/null | while read -r p st _; do
    set -- $(cut -d' ' -f3,22 "/proc/$p/stat" 2>/dev/null)
    [[ $# == 2 && $2 == "$st" && $1 != Z && $1 != X ]] && echo "$p"
  done
  return 0
}
chaos_exit() {
  local rc=$? p
  set +e
  for p in "${!FROZEN[@]}"; do kill -CONT "$p" 2>/dev/null; done
  live_steps >"$M/live"
  (exit "$rc")
  e2e_cleanup
}
trap chaos_exit EXIT

rnd() { R=$((RANDOM % $1)); }   # never in a subshell: the sequence is the seed's
log() { echo "t=${SECONDS}s $*" >>"$CHAOS_LOG"; }

# --- one step of a workflow: step.sh MARKS STEP SECONDS [EXTRA [FAIL_ON_ATTEMPT]]
# Each worker process has a token of its own in its environment
# (CHAOS_WORKER, workers.tsv: id pid token), which its steps inherit: a run
# of a job is its attempt and its worker's token.  The step writes
# "start|orphan|done|fail JOB STEP ATTEMPT TOKEN PARENT_PID PID TIME" to
# MARKS/marks, registers itself in MARKS/reg.JOB, and at its start and end
# looks for a process of another run of the same job still running (pid and
# start time as registered, not a zombie): MARKS/overlaps.  A step that finds
# its worker gone as it starts (its parent is not the worker: "orphan") sleeps
# 3 s more: a step its worker's step guard stops dies at once, one that no
# one stops reaches its end.
# Prints STEP@ATTEMPT/TOKEN[EXTRA].
S=$E2E_DIR/step.sh
cat >"$S" <<'EOF'
#!/bin/sh
m=$1 step=$2 secs=$3 extra=${4-} failat=${5-0}
j=$BGEXEC_JOB_ID a=$BGEXEC_ATTEMPT k=$CHAOS_WORKER pp=$PPID
st=$(cut -d' ' -f22 /proc/$$/stat)
echo "$$" >>"$m/pids"
echo "$$ $st $a $k $step" >>"$m/reg.$j"
echo "start $j $step $a $k $pp $$ $(date +%s.%N)" >>"$m/marks"
if ! grep -qzx "CHAOS_WORKER=$k" "/proc/$pp/environ" 2>/dev/null; then
  echo "orphan $j $step $a $k $pp $$ $(date +%s.%N)" >>"$m/marks"
  secs="$secs 3"
fi
look() {
  ph=$1
  while read -r p s oa ok ostep; do
    [ "$oa $ok" = "$a $k" ] && continue
    set -- $(cut -d' ' -f3,22 "/proc/$p/stat" 2>/dev/null)
    [ $# = 2 ] && [ "$2" = "$s" ] && [ "$1" != Z ] && [ "$1" != X ] || continue
    echo "job $j: at the $ph of step $step, attempt $a (worker $k, pid $$), step $ostep of attempt $oa (worker $ok, pid $p, state $1) was running; $(date +%s.%N)" >>"$m/overlaps"
  done <"$m/reg.$j"
}
look start
sleep $secs
look end
if [ "$failat" = "$a" ]; then
  echo "fail $j $step $a $k $pp $$ $(date +%s.%N)" >>"$m/marks"
  echo "failing on purpose at attempt $a" >&2
  exit 1
fi
echo "done $j $step $a $k $pp $$ $(date +%s.%N)" >>"$m/marks"
echo "$step@$a/$k[$extra]"
EOF
chmod 755 "$S"

# --- workload
secs() { rnd "$1"; printf -v SECS '%d.%d' $(((R + $2) / 10)) $(((R + $2) % 10)); }
step_json() {  # ID NEEDS_JSON SECONDS [EXTRA [FAILAT]]
  STEP="{\"id\": \"$1\", \"needs\": $2, \"run\": [\"sh\", \"$S\", \"$M\", \"$1\", \"$3\", \"${4-}\", \"${5-0}\"]}"
}
# diamond FAILAT_B: a -> (b, c) -> z, sometimes a sql step q and a sleep step
# nap beside them; b carries a's output, z b's and c's (checked at the end).
diamond() {
  local steps
  secs 16 5; step_json a '[]' "$SECS"; steps=$STEP
  secs 21 5; step_json b '["a"]' "$SECS" '{{steps.a.stdout}}' "$1"; steps+=", $STEP"
  secs 21 5; step_json c '["a"]' "$SECS"; steps+=", $STEP"
  secs 7 2; step_json z '["b", "c"]' "$SECS" '{{steps.b.stdout}}+{{steps.c.stdout}}'; steps+=", $STEP"
  # q writes a row under the job's key (the next add_job's): committed once,
  # with its step_completed (checked at the end)
  rnd 3; ((R == 0)) && steps+=', {"id": "q", "needs": ["a"], "sql": "INSERT INTO chaos_q (key, echo) SELECT '"'chaos-$((NJOBS + 1))'"', $1::text FROM pg_sleep(0.3) RETURNING echo", "params": ["{{steps.a.stdout}}"]}'
  rnd 3; ((R == 0)) && steps+=', {"id": "nap", "needs": ["a"], "sleep": 0.5}'
  PAYLOAD="{\"steps\": [$steps]}"
}
NJOBS=0
BATCH=()
add_job() {  # CLASS KIND MAX_ATTEMPTS PAYLOAD [TIMEOUT_S]
  local key="chaos-$((++NJOBS))" t=
  [[ -n ${5-} ]] && t=", \"timeout\": $5"
  BATCH+=("{\"kind\": \"$2\", \"queue\": \"chaos\", \"max_attempts\": $3, \"idempotency_key\": \"$key\", \"payload\": $4$t}")
  echo "$key $1 $2 $3" >>"$E2E_DIR/expected.tsv"
}
add_mix() {  # NOOP ONCE SAFE FLAKY TIMEOUT
  local i
  for ((i = 0; i < $1; i++)); do rnd 4; add_job noop noop $((R == 0 ? 3 : 1)) '{}'; done
  for ((i = 0; i < $2; i++)); do diamond 0; add_job once workflow 1 "$PAYLOAD"; done
  for ((i = 0; i < $3; i++)); do diamond 0; rnd 5; add_job safe workflow $((4 + R)) "$PAYLOAD"; done
  for ((i = 0; i < $4; i++)); do diamond 1; add_job flaky workflow 4 "$PAYLOAD"; done
  for ((i = 0; i < $5; i++)); do
    step_json t '[]' 6; add_job timeout workflow 1 "{\"steps\": [$STEP]}" 2
  done
}
# submit_batch: submit_many with idempotency keys, again until it answers (a
# restart may lose the reply of a committed submit: the keys make the retry
# return the same jobs).
submit_batch() {
  local json deadline=$((SECONDS + 90)) n
  json="[$(IFS=,; echo "${BATCH[*]}")]"
  until n=$(psql -qXAt -v ON_ERROR_STOP=1 -v j="$json" 2>>"$E2E_DIR/psql.err" <<<"SELECT count(*) FROM bgexec.submit_many(:'j'::jsonb)"); do
    ((SECONDS < deadline)) || fail "submit_many did not succeed within 90 s: $(tail -3 "$E2E_DIR/psql.err")"
    sleep 0.5
  done
  [[ $n == "${#BATCH[@]}" ]] || fail "submit_many returned $n ids for ${#BATCH[@]} jobs"
  log "submitted ${#BATCH[@]} jobs (total $NJOBS)"
  BATCH=()
}

sql "SELECT bgexec.configure_queue('chaos', retry_base => '200 ms', retry_cap => '2 s')" >/dev/null
sql "CREATE TABLE chaos_q (key text, echo text); GRANT ALL ON chaos_q TO PUBLIC" >/dev/null
add_mix 30 10 14 4 2
submit_batch

# --- workers: NSLOTS slots, each a worker process at a time
NSLOTS=4
WORKER_ARGS=(--allow-run --queue chaos --concurrency 3 --reconcile-interval 1 --grace 5)
declare -a SLOT_ID SLOT_PID SLOT_TOKEN
declare -A GEN=()
UNEXPECTED=()
NTOKENS=0
worker() {  # ID: start_worker with a token of its own (CHAOS_WORKER)
  export CHAOS_WORKER=k$((++NTOKENS))
  start_worker "$1" "${WORKER_ARGS[@]}"
  echo "$1 $WORKER_PID $CHAOS_WORKER" >>"$E2E_DIR/workers.tsv"
}
launch() {  # SLOT ID
  worker "$2"
  SLOT_ID[$1]=$2
  SLOT_PID[$1]=$WORKER_PID
  SLOT_TOKEN[$1]=$CHAOS_WORKER
  log "started worker $2 pid $WORKER_PID in slot $1"
}
forget() {  # PID: reaped, so never signalled again (its pid may be reused)
  local p keep=()
  for p in "${E2E_PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
  E2E_PIDS=("${keep[@]}")
  unset "FROZEN[$1]" "ORPHAN[$1]"
}
new_id() {  # SLOT: the slot's id, or (half the time) a new one
  local base=w$1
  rnd 2
  if ((R == 0)); then ID=${SLOT_ID[$1]}; else GEN[$base]=$((${GEN[$base]:-0} + 1)); ID=${base}g${GEN[$base]}; fi
}
for ((s = 1; s <= NSLOTS; s++)); do launch "$s" "w$s"; done

# taker ID: the live orphan of id ID, if any. An impostor frozen before it
# had registered is an orphan still waiting for the id; continued while the
# slot's newer process of that id is frozen past its lease, it takes the id
# back, and the newer one must exit 3 once told.
taker() {
  local o
  for o in "${!ORPHAN[@]}"; do
    [[ ${ORPHAN[$o]} == "$1" && -z ${FROZEN[$o]:-} ]] && kill -0 "$o" 2>/dev/null && { echo "$o"; return 0; }
  done
  return 1
}
# reap: a worker that exited on its own is replaced (an orphan may exit 3
# once it learns that its id was taken, and so may a slot's worker whose id
# an orphan took: that orphan becomes the slot's worker; anything else is
# noted)
reap() {
  local s p rc o
  for s in "${!SLOT_PID[@]}"; do
    p=${SLOT_PID[$s]}
    kill -0 "$p" 2>/dev/null && continue
    rc=0; wait "$p" || rc=$?
    if ((rc == 3)) && o=$(taker "${SLOT_ID[$s]}"); then
      log "worker ${SLOT_ID[$s]} pid $p exited 3: orphan pid $o took its id, and is now slot $s's worker"
      forget "$p"
      unset "ORPHAN[$o]"
      SLOT_PID[$s]=$o
      SLOT_TOKEN[$s]=$(awk -v p="$o" '$2 == p {t = $3} END {print t}' "$E2E_DIR/workers.tsv")
      TOOK_BACK[${SLOT_ID[$s]}]=1
      continue
    fi
    UNEXPECTED+=("worker ${SLOT_ID[$s]} (pid $p) exited $rc on its own")
    log "worker ${SLOT_ID[$s]} pid $p exited $rc on its own"
    forget "$p"
    new_id "$s"; launch "$s" "$ID"
  done
  for p in "${!ORPHAN[@]}"; do
    kill -0 "$p" 2>/dev/null && continue
    [[ -n ${FROZEN[$p]:-} ]] && continue
    rc=0; wait "$p" || rc=$?
    ((rc == 0 || rc == 3)) || UNEXPECTED+=("orphaned worker ${ORPHAN[$p]} (pid $p) exited $rc")
    log "orphaned worker ${ORPHAN[$p]} pid $p exited $rc"
    forget "$p"
  done
}
thaw() {  # continue the frozen workers whose time has come (all with "all")
  local p
  for p in "${!FROZEN[@]}"; do
    if [[ ${1-} == all ]] || ((SECONDS >= FROZEN[$p])); then
      kill -CONT "$p" 2>/dev/null || true
      log "continued pid $p"
      unset "FROZEN[$p]"
    fi
  done
}

# --- faults
kill9() {  # [SLOT [WHY]]
  local s=${1-} p
  [[ -n $s ]] || { rnd "$NSLOTS"; s=$((R + 1)); }
  p=${SLOT_PID[$s]}
  kill -KILL "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
  log "kill -9 worker ${SLOT_ID[$s]} pid $p${2-}"
  forget "$p"
  new_id "$s"; launch "$s" "$ID"
}
freeze() {  # [impostor]: SIGSTOP a worker for 3-6 s (lease 2 s)
  local s p
  rnd "$NSLOTS"; s=$((R + 1)); p=${SLOT_PID[$s]}
  [[ -n ${FROZEN[$p]:-} ]] && return 0
  rnd 4
  FROZEN[$p]=$((SECONDS + 3 + R))
  kill -STOP "$p"
  log "SIGSTOP worker ${SLOT_ID[$s]} pid $p until t=${FROZEN[$p]}s"
  if [[ ${1-} == impostor ]]; then
    # a new process of the same id: it waits for the frozen one to miss its
    # lease, then takes the id; the frozen one, continued, must write nothing
    # more and exit (3) once told
    ORPHAN[$p]=${SLOT_ID[$s]}
    launch "$s" "${SLOT_ID[$s]}"
    log "impostor of ${SLOT_ID[$s]}: pid ${SLOT_PID[$s]}"
  fi
}
# snipe: kill -9 the worker of the next step of steps a, b or c to end, 0-9 ms
# after its end: about when the worker starts the step after it (the spawn
# and telling its step guard of it are the window aimed at)
snipe() {
  local line job step tok s
  line=$(grep -m1 -E '^done [0-9]+ [abc] ' < <(timeout 3 tail -n 0 -F "$M/marks" 2>/dev/null)) || return 0
  read -r _ job step _ tok _ <<<"$line"
  for s in "${!SLOT_TOKEN[@]}"; do
    [[ ${SLOT_TOKEN[$s]} == "$tok" && -z ${FROZEN[${SLOT_PID[$s]}]:-} ]] || continue
    rnd 10; sleep "0.00$R"
    kill9 "$s" " ${R} ms after step $step of job $job ended"
    return 0
  done
}
PG_DONE=0
pg_restart() {
  log "restarting PostgreSQL (immediate)"
  cluster_restart "$E2E_DIR/pg" || fail "PostgreSQL did not come back"
  PG_DONE=$((PG_DONE + 1))
  log "PostgreSQL is back"
}
stop_one() {  # bgexec.stop() of a random running or queued job
  local ids
  ids=($(sql "SELECT id FROM bgexec.job WHERE status IN ('running', 'queued') ORDER BY id" 2>/dev/null)) || return 0
  ((${#ids[@]})) || return 0
  rnd "${#ids[@]}"
  echo "${ids[$R]}" >>"$E2E_DIR/stopped.tsv"   # before the call: its reply may be lost
  log "stop job ${ids[$R]}: $(sql "SELECT bgexec.stop(${ids[$R]})" 2>&1)"
}

rnd 10; AT_FREEZE=$((CHAOS_SECONDS * (10 + R) / 100))
rnd 20; AT_PG=$((CHAOS_SECONDS * (30 + R) / 100))
rnd 15; AT_IMPOSTOR=$((CHAOS_SECONDS * (55 + R) / 100))
START=$SECONDS
END=$((START + CHAOS_SECONDS))
LAST_PG=$START
while ((SECONDS < END)); do
  rnd 8; sleep "0.$((R + 2))"
  ((R >= 5)) && sleep 0.5
  thaw
  reap
  t=$((SECONDS - START))
  if ((AT_FREEZE >= 0 && t >= AT_FREEZE)); then AT_FREEZE=-1; freeze; continue; fi
  if ((AT_PG >= 0 && t >= AT_PG && CHAOS_PG_RESTARTS > 0)); then AT_PG=-1; LAST_PG=$SECONDS; pg_restart; continue; fi
  if ((AT_IMPOSTOR >= 0 && t >= AT_IMPOSTOR)); then AT_IMPOSTOR=-1; freeze impostor; continue; fi
  rnd 100
  if ((R < 18)); then kill9
  elif ((R < 35)); then snipe
  elif ((R < 47)); then ((${#FROZEN[@]} < 2)) && freeze
  elif ((R < 50)); then rnd 3; ((${#FROZEN[@]} < 2)) && freeze impostor
  elif ((R < 53)); then
    ((PG_DONE < CHAOS_PG_RESTARTS && SECONDS - LAST_PG > 10)) && { LAST_PG=$SECONDS; pg_restart; }
  elif ((R < 75)); then
    rnd 3; add_mix 6 3 5 $((R == 0)) $((R == 1)); submit_batch
  elif ((R < 80)); then stop_one
  fi
done
FAULTS="$(grep -c ' kill -9 worker' "$CHAOS_LOG") kill -9, $(grep -c ' SIGSTOP worker' "$CHAOS_LOG") SIGSTOP ($(grep -c ' impostor of' "$CHAOS_LOG") with an impostor), $PG_DONE PostgreSQL restarts, $(wc -l <"$E2E_DIR/stopped.tsv") stops"
log "faults over: $FAULTS; $NJOBS jobs"
echo "# $(tail -1 "$CHAOS_LOG")" >&2

# --- drain: continue the frozen, add fresh workers, wait for every job to end
thaw all
for ((s = 1; s <= 3; s++)); do worker "f$s"; done
drained() {
  reap
  [[ $(sql "SELECT count(*) FROM bgexec.job WHERE status NOT IN ('completed', 'failed', 'cancelled', 'timed_out')") == 0 ]]
}
wait_for "$CHAOS_DRAIN" drained || fail "jobs left after ${CHAOS_DRAIN}s of draining: $(sql "SELECT string_agg(format('%s %s attempt %s/%s owner %s expires %s run_after %s',
    id, status, attempt, max_attempts, lease_owner, lease_expires_at - now(), run_after - now()), '; ' ORDER BY id)
  FROM bgexec.job WHERE status NOT IN ('completed', 'failed', 'cancelled', 'timed_out')")"
log "drained"

# --- every worker stops (SIGTERM drains; nothing is left to run)
for p in "${E2E_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${E2E_PIDS[@]}"; do
  for _ in $(seq 1 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$p" 2>/dev/null && { UNEXPECTED+=("worker pid $p did not stop within 20 s of SIGTERM"); kill -KILL "$p"; }
  rc=0; wait "$p" || rc=$?
  id=$(awk -v p="$p" '$2 == p {i = $1} END {print i}' "$E2E_DIR/workers.tsv")
  # (an orphan of its id may have taken it back since the last reap)
  orphan=0; [[ -n ${ORPHAN[$p]:-} || -n ${TOOK_BACK[$id]:-} || " ${ORPHAN[*]} " == *" $id "* ]] && orphan=1
  ((rc == 0 || (rc == 3 && orphan))) || UNEXPECTED+=("worker pid $p ($id) exited $rc after SIGTERM")
done
E2E_PIDS=()

# --- no step process left behind (whatever its pid: by its environment)
steps_left() {
  local f p
  LEFT=()
  for f in $(grep -lzx "CHAOS_TAG=$E2E_DIR" /proc/[0-9]*/environ 2>/dev/null); do
    p=${f#/proc/}; p=${p%/environ}
    grep -qz '^BGEXEC_JOB_ID=' "$f" 2>/dev/null || continue
    [[ $(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null) == [ZX] ]] && continue
    LEFT+=("$p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)")
  done
  ((${#LEFT[@]} == 0))
}
wait_for 10 steps_left || { steps_left || true; fail "step processes left running after every worker stopped: ${LEFT[*]}"; }

# --- the invariants
sql "CREATE SCHEMA chaos;
     CREATE TABLE chaos.expected (key text PRIMARY KEY, class text, kind text, max_attempts int);
     CREATE TABLE chaos.marks (what text, job bigint, step text, attempt int, token text, ppid int, pid int, t numeric);
     CREATE TABLE chaos.workers (id text, pid int, token text PRIMARY KEY);
     CREATE TABLE chaos.stopped (job bigint)" >/dev/null
psql -qX -v ON_ERROR_STOP=1 >/dev/null <<EOF || fail "loading the marks failed"
\copy chaos.expected FROM '$E2E_DIR/expected.tsv' (DELIMITER ' ')
\copy chaos.marks FROM '$M/marks' (DELIMITER ' ')
\copy chaos.workers FROM '$E2E_DIR/workers.tsv' (DELIMITER ' ')
\copy chaos.stopped FROM '$E2E_DIR/stopped.tsv' (DELIMITER ' ')
EOF

CHECKS=$(cat <<'EOF'
CREATE TEMP VIEW ev AS
SELECT e.*,
       max(e.seq) FILTER (WHERE e.kind = 'started') OVER upto AS run_seq,
       max(e.seq) FILTER (WHERE e.kind IN ('started', 'retry_scheduled', 'worker_lost', 'suspended',
                                           'completed', 'failed', 'cancelled', 'timed_out')) OVER before AS ctl_seq
  FROM bgexec.job_event e
WINDOW upto AS (PARTITION BY e.job_id ORDER BY e.seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
       before AS (PARTITION BY e.job_id ORDER BY e.seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING);
-- step_completed events with the run (started event) they were written in
CREATE TEMP VIEW done AS
SELECT e.job_id, e.seq, e.data->>'step' AS step, e.data->'output' AS output,
       (s.data->>'attempt')::int AS attempt, s.data->>'worker' AS worker
  FROM ev e LEFT JOIN bgexec.job_event s ON s.job_id = e.job_id AND s.seq = e.run_seq
 WHERE e.kind = 'step_completed';
CREATE TEMP VIEW runs AS
SELECT m.job, m.attempt, m.token, w.id AS worker, w.pid, string_agg(m.what || ' ' || m.step, ',' ORDER BY m.t) AS marks
  FROM chaos.marks m LEFT JOIN chaos.workers w ON w.token = m.token GROUP BY m.job, m.attempt, m.token, w.id, w.pid;
-- each claim of a job (started event): its attempt, worker and time
CREATE TEMP VIEW claims AS
SELECT s.job_id, s.seq, (s.data->>'attempt')::int AS attempt, s.data->>'worker' AS worker,
       extract(epoch FROM s.created_at) AS t_start
  FROM bgexec.job_event s WHERE s.kind = 'started';

-- 1. no job lost
SELECT format('lost: the job of key %s (%s) is not in bgexec.job', x.key, x.class)
  FROM chaos.expected x WHERE NOT EXISTS (SELECT FROM bgexec.job j WHERE j.idempotency_key = x.key);
SELECT format('lost: job %s (key %s) is not one this test submitted', j.id, j.idempotency_key)
  FROM bgexec.job j WHERE NOT EXISTS (SELECT FROM chaos.expected x WHERE x.key = j.idempotency_key);
SELECT format('lost: %s jobs for %s submissions', (SELECT count(*) FROM bgexec.job), (SELECT count(*) FROM chaos.expected))
 WHERE (SELECT count(*) FROM bgexec.job) <> (SELECT count(*) FROM chaos.expected);
SELECT format('lost: job %s (%s) is %s after the drain (attempt %s of %s)', j.id, j.idempotency_key, j.status, j.attempt, j.max_attempts)
  FROM bgexec.job j WHERE j.status NOT IN ('completed', 'failed', 'cancelled', 'timed_out');
SELECT format('lost: job %s (%s) is %s with max_attempts %s, submitted as %s with %s', j.id, x.key, j.kind, j.max_attempts, x.kind, x.max_attempts)
  FROM bgexec.job j JOIN chaos.expected x ON x.key = j.idempotency_key
 WHERE (j.kind, j.max_attempts) <> (x.kind, x.max_attempts);
SELECT format('status: job %s is cancelled, but it was never stopped', j.id)
  FROM bgexec.job j WHERE j.status = 'cancelled' AND j.id NOT IN (SELECT job FROM chaos.stopped);
SELECT format('status: job %s is timed_out without a timeout', j.id)
  FROM bgexec.job j WHERE j.status = 'timed_out' AND j.timeout IS NULL;

-- 2. exactly one terminal event, of the job's status, last, with its result/error
SELECT m FROM (
SELECT CASE
  WHEN coalesce(t.n, 0) <> 1 THEN format('terminal: job %s is %s with %s terminal events (%s)', j.id, j.status, coalesce(t.n, 0), t.kinds)
  WHEN t.kinds <> j.status::text THEN format('terminal: job %s is %s, its terminal event (seq %s) is %s', j.id, j.status, t.seq, t.kinds)
  WHEN t.seq <> j.last_seq THEN format('terminal: job %s has events after its terminal event (seq %s, last_seq %s)', j.id, t.seq, j.last_seq)
  WHEN j.status = 'completed' AND t.data->'result' IS DISTINCT FROM j.result
    THEN format('terminal: job %s result %s, its completed event has %s', j.id, j.result, t.data->'result')
  WHEN j.status <> 'completed' AND coalesce(t.data->'error', 'null') IS DISTINCT FROM coalesce(j.error, 'null')
    THEN format('terminal: job %s error %s, its %s event has %s', j.id, j.error, t.kinds, t.data->'error')
  END AS m
  FROM bgexec.job j
  LEFT JOIN (SELECT job_id, count(*) AS n, string_agg(kind, ',') AS kinds, max(seq) AS seq, (array_agg(data))[1] AS data
               FROM bgexec.job_event WHERE kind IN ('completed', 'failed', 'cancelled', 'timed_out')
              GROUP BY job_id) t ON t.job_id = j.id) x
 WHERE m IS NOT NULL;

-- 3. gapless event log, last_seq its end
SELECT format('gapless: job %s has %s events (%s distinct seqs), seq %s..%s, last_seq %s', j.id, coalesce(g.n, 0), g.d, g.lo, g.hi, j.last_seq)
  FROM bgexec.job j
  LEFT JOIN (SELECT job_id, count(*) AS n, count(DISTINCT seq) AS d, min(seq) AS lo, max(seq) AS hi
               FROM bgexec.job_event GROUP BY job_id) g ON g.job_id = j.id
 WHERE coalesce(g.n, 0) <> j.last_seq OR g.d <> g.n OR g.lo <> 1 OR g.hi <> j.last_seq;
SELECT format('gapless: %s events of job %s, which does not exist', count(*), e.job_id)
  FROM bgexec.job_event e WHERE NOT EXISTS (SELECT FROM bgexec.job j WHERE j.id = e.job_id) GROUP BY e.job_id;

-- 4. single flight and fenced writes, from the events
SELECT format('attempts: job %s is at attempt %s of %s with %s started events (%s claims given back uncounted)',
              j.id, j.attempt, j.max_attempts, coalesce(s.started, 0), coalesce(s.unclaimed, 0))
  FROM bgexec.job j
  LEFT JOIN (SELECT job_id, count(*) FILTER (WHERE kind = 'started') AS started,
                    count(*) FILTER (WHERE kind = 'retry_scheduled' AND data->'error'->>'reason' = 'claim_reply_lost') AS unclaimed
               FROM bgexec.job_event GROUP BY job_id) s ON s.job_id = j.id
 WHERE coalesce(s.started, 0) - coalesce(s.unclaimed, 0) <> j.attempt OR j.attempt > j.max_attempts;
SELECT format('single flight: lease %s was given %s times (jobs %s)', data->>'lease', count(*), string_agg(job_id::text, ','))
  FROM bgexec.job_event WHERE kind = 'started' GROUP BY data->>'lease' HAVING count(*) > 1;
SELECT format('fenced: job %s event %s (%s %s) was written outside a run: the run''s last event before it is %s (seq %s)',
              e.job_id, e.seq, e.kind, coalesce(e.data->>'step', ''), coalesce(c.kind, 'none'), e.ctl_seq)
  FROM ev e LEFT JOIN bgexec.job_event c ON c.job_id = e.job_id AND c.seq = e.ctl_seq
 WHERE e.kind IN ('step_started', 'step_completed', 'step_failed', 'log', 'progress')
   AND c.kind IS DISTINCT FROM 'started';
SELECT format('single flight: job %s step %s completed %s times (seqs %s)', job_id, step, count(*), string_agg(seq::text, ',' ORDER BY seq))
  FROM done GROUP BY job_id, step HAVING count(*) > 1;
SELECT format('completed: job %s is completed, but its step %s has %s step_completed events', j.id, st->>'id',
              (SELECT count(*) FROM done d WHERE d.job_id = j.id AND d.step = st->>'id'))
  FROM bgexec.job j CROSS JOIN jsonb_array_elements(j.payload->'steps') st
 WHERE j.status = 'completed' AND j.kind = 'workflow'
   AND (SELECT count(*) FROM done d WHERE d.job_id = j.id AND d.step = st->>'id') <> 1;
SELECT format('completed: job %s result.%s is %s, its step_completed output %s', j.id, st->>'id', j.result->(st->>'id'), d.output)
  FROM bgexec.job j CROSS JOIN jsonb_array_elements(j.payload->'steps') st
  JOIN done d ON d.job_id = j.id AND d.step = st->>'id'
 WHERE j.status = 'completed' AND j.kind = 'workflow'
   AND NOT EXISTS (SELECT FROM jsonb_array_elements(j.payload->'steps') o WHERE o->'needs' ? (st->>'id'))
   AND j.result->(st->>'id') IS DISTINCT FROM d.output;
-- a step's templates read the outputs recorded for the steps it needs
SELECT format('outputs: job %s step %s output %s, from %s recorded as %s', x.job_id, x.step, x.output, x.src, x.want)
  FROM (SELECT b.job_id, b.step, b.output #>> '{}' AS output, 'a' AS src, '[' || (a.output #>> '{}') || ']' AS want
          FROM done b JOIN done a ON a.job_id = b.job_id AND a.step = 'a' WHERE b.step = 'b'
        UNION ALL
        SELECT z.job_id, z.step, z.output #>> '{}', 'b+c', '[' || (b.output #>> '{}') || '+' || (c.output #>> '{}') || ']'
          FROM done z JOIN done b ON b.job_id = z.job_id AND b.step = 'b'
          JOIN done c ON c.job_id = z.job_id AND c.step = 'c' WHERE z.step = 'z') x
 WHERE right(x.output, length(x.want)) IS DISTINCT FROM x.want;

-- 5. at-most-once and no re-run of completed steps, from the marks
SELECT format('at-most-once: job %s (max_attempts 1) ran %s times: %s', r.job, count(*),
              string_agg(format('attempt %s on worker %s (%s, pid %s): %s', r.attempt, r.worker, r.token, r.pid, r.marks), '; '))
  FROM runs r JOIN bgexec.job j ON j.id = r.job
 WHERE j.max_attempts = 1 GROUP BY r.job HAVING count(*) > 1;
SELECT format('at-most-once: job %s step %s started %s times in attempt %s on worker %s', job, step, count(*), attempt, token)
  FROM chaos.marks WHERE what = 'start' GROUP BY job, step, attempt, token HAVING count(*) > 1;
SELECT format('re-run: job %s step %s completed in attempt %s (seq %s) and started again in attempt %s (worker %s, pid %s)',
              d.job_id, d.step, d.attempt, d.seq, m.attempt, m.token, m.pid)
  FROM done d JOIN chaos.marks m ON m.job = d.job_id AND m.step = d.step AND m.what = 'start' AND m.attempt > d.attempt;
SELECT format('single flight: job %s ran attempt %s on worker %s (%s, pid %s: %s), but no started event gave that attempt to that worker (started: %s)',
              r.job, r.attempt, r.worker, r.token, r.pid, r.marks,
              (SELECT string_agg(format('%s:%s', c.attempt, c.worker), ',' ORDER BY c.seq) FROM claims c WHERE c.job_id = r.job))
  FROM runs r
 WHERE NOT EXISTS (SELECT FROM claims c WHERE c.job_id = r.job AND c.attempt = r.attempt AND c.worker = r.worker);
SELECT format('phantom: job %s step %s is completed (seq %s) in attempt %s by worker %s, but no process of that worker ran it to its end then',
              d.job_id, d.step, d.seq, d.attempt, d.worker)
  FROM done d
 WHERE d.step IN ('a', 'b', 'c', 'z', 't')
   AND NOT EXISTS (SELECT FROM chaos.marks m JOIN chaos.workers w ON w.token = m.token AND w.id = d.worker
                    WHERE m.what = 'done' AND m.job = d.job_id AND m.step = d.step AND m.attempt = d.attempt);

-- 6. single flight on the host: no step process of a run alive once the
-- database gave its job to a later run or ended it (host and database share
-- the clock), no two runs' steps at once, and none left running unstopped
-- after its worker was gone
SELECT format('single flight: job %s step %s of attempt %s (worker %s, pid %s) was alive at %s (its %s mark), %s s after the job was claimed again (attempt %s by %s, seq %s)',
              m.job, m.step, m.attempt, m.token, m.pid, to_char(to_timestamp(m.t), 'HH24:MI:SS.MS'), m.what,
              round(m.t - c.t_start, 3), c.attempt, c.worker, c.seq)
  FROM chaos.marks m JOIN runs r ON (r.job, r.attempt, r.token) = (m.job, m.attempt, m.token)
  JOIN claims c ON c.job_id = m.job AND c.t_start < m.t
   AND c.seq > (SELECT max(o.seq) FROM claims o WHERE o.job_id = m.job AND (o.attempt, o.worker) = (m.attempt, r.worker)
                   AND o.t_start <= m.t);
SELECT format('single flight: job %s step %s of attempt %s (worker %s, pid %s) was alive at %s (its %s mark), %s s after the job ended (%s, seq %s)',
              m.job, m.step, m.attempt, m.token, m.pid, to_char(to_timestamp(m.t), 'HH24:MI:SS.MS'), m.what,
              round(m.t - extract(epoch FROM e.created_at), 3), e.kind, e.seq)
  FROM chaos.marks m JOIN bgexec.job_event e ON e.job_id = m.job AND e.kind IN ('completed', 'failed', 'cancelled', 'timed_out')
 WHERE m.t > extract(epoch FROM e.created_at);
SELECT format('single flight: job %s step %s of attempt %s (worker %s, pid %s) found its worker (pid %s) gone at %s (its parent: pid %s), and no one stopped it: it reached its end (%s mark) %s s later',
              o.job, o.step, o.attempt, o.token, o.pid, w.pid, to_char(to_timestamp(o.t), 'HH24:MI:SS.MS'), o.ppid, e.what, round(e.t - o.t, 3))
  FROM chaos.marks o JOIN chaos.workers w ON w.token = o.token
  JOIN chaos.marks e ON e.what IN ('done', 'fail') AND (e.job, e.step, e.attempt, e.token, e.pid) = (o.job, o.step, o.attempt, o.token, o.pid)
 WHERE o.what = 'orphan';
-- a sql step's insert commits once, with its step_completed: a re-run
-- does not run it again, and no record is without its insert
WITH c AS (
  SELECT j.id,
         (SELECT count(*) FROM public.chaos_q x WHERE x.key = j.idempotency_key) AS rows,
         (SELECT count(*) FROM bgexec.job_event e
           WHERE e.job_id = j.id AND e.kind = 'step_completed' AND e.data->>'step' = 'q') AS recorded
    FROM bgexec.job j WHERE j.queue = 'chaos')
SELECT format('exactly once: sql step q of job %s committed its insert %s times, recorded done %s times', id, rows, recorded)
  FROM c WHERE rows <> recorded OR rows > 1;
WITH iv AS (
  SELECT s.job, s.step, s.attempt, s.token, s.t AS t0, e.t AS t1
    FROM chaos.marks s JOIN chaos.marks e ON e.what IN ('done', 'fail') AND (e.job, e.step, e.attempt, e.token, e.pid) = (s.job, s.step, s.attempt, s.token, s.pid)
   WHERE s.what = 'start')
SELECT format('single flight: job %s step %s of attempt %s (worker %s) ran %s..%s, step %s of attempt %s (worker %s) %s..%s',
              x.job, x.step, x.attempt, x.token, x.t0, x.t1, y.step, y.attempt, y.token, y.t0, y.t1)
  FROM iv x JOIN iv y ON x.job = y.job AND (x.attempt, x.token) < (y.attempt, y.token) AND x.t0 < y.t1 AND y.t0 < x.t1;
EOF
)
VIOLATIONS=$(psql -qXAt -v ON_ERROR_STOP=1 <<<"BEGIN; $CHECKS ROLLBACK;") || fail "the checks did not run"
[[ -s $M/overlaps ]] && VIOLATIONS+=$'\n'$(sed 's/^/single flight (step.sh): /' "$M/overlaps")
for u in "${UNEXPECTED[@]}"; do VIOLATIONS+=$'\n'"worker: $u"; done
VIOLATIONS=$(sed '/^$/d' <<<"$VIOLATIONS")
if [[ -n $VIOLATIONS ]]; then
  echo "$VIOLATIONS" >"$E2E_DIR/violations.txt"
  fail "seed $CHAOS_SEED: $(wc -l <<<"$VIOLATIONS") invariant violations; first ones:
$(head -20 <<<"$VIOLATIONS")"
fi

summary=$(sql "SELECT string_agg(format('%s %s', n, status), ', ' ORDER BY status)
                 FROM (SELECT status, count(*) AS n FROM bgexec.job GROUP BY status) s")
runs=$(sql "SELECT format('%s workflow runs, %s jobs run more than once, %s worker_lost, %s retry_scheduled',
                 (SELECT count(*) FROM (SELECT DISTINCT job, attempt, token FROM chaos.marks) r),
                 (SELECT count(*) FROM bgexec.job WHERE attempt > 1),
                 (SELECT count(*) FROM bgexec.job_event WHERE kind = 'worker_lost'),
                 (SELECT count(*) FROM bgexec.job_event WHERE kind = 'retry_scheduled'))")
ok "seed $CHAOS_SEED: $NJOBS jobs ($summary); $runs; faults: $FAULTS"

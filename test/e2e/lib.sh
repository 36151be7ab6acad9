# Helpers for the end-to-end tests (sourced by each test/e2e/NN-name.sh).
# Every test starts its own throwaway cluster on its own port, runs real
# `bgexec` binaries, records every PID it starts, and cleans up by PID.
set -euo pipefail

E2E_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../../scripts/lib/cluster.sh
source "$E2E_ROOT/scripts/lib/cluster.sh"
BGEXEC=${BGEXEC:-$E2E_ROOT/daemon/build/bgexec}
E2E_NAME=$(basename "$0" .sh)
E2E_DIR=$(mktemp -d "/tmp/bgexec-e2e-$E2E_NAME.XXXXXX")
chmod 755 "$E2E_DIR"
E2E_PIDS=()        # worker PIDs
E2E_PIDFILES=()    # files holding PIDs of step processes a test wants dead at exit
E2E_STOPPED=()     # server backends a test stopped (SIGSTOP): continued before the cluster stops
E2E_CLUSTERS=()    # more cluster dirs (a standby) cluster_stop stops at exit, before $E2E_DIR/pg

e2e_cleanup() {
  local rc=$? p f
  for p in "${E2E_STOPPED[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
  for p in "${E2E_PIDS[@]}"; do { kill -KILL "$p" && wait "$p"; } 2>/dev/null || true; done
  for f in "${E2E_PIDFILES[@]}"; do
    [[ -f $f ]] || continue
    while read -r p; do [[ -n $p ]] && kill -KILL -- "-$p" "$p" 2>/dev/null || true; done <"$f"
  done
  for f in "${E2E_CLUSTERS[@]}"; do cluster_stop "$f" >/dev/null 2>&1 || true; done
  cluster_stop "$E2E_DIR/pg" || true
  # A failed Assert() of an assert-enabled server (make test-assert) kills
  # its backend, which the test may survive: its TRAP line fails the test.
  if grep -hs 'TRAP:' "$E2E_DIR/pg/postgres.log" "${E2E_CLUSTERS[@]/%//postgres.log}" >&2; then
    echo "FAIL $E2E_NAME: a failed Assert() in the server (above)"
    ((rc == 0)) && rc=1
  fi
  if ((rc == 0)) && [[ -z ${E2E_KEEP:-} ]]; then rm -rf "$E2E_DIR"; else echo "# logs kept in $E2E_DIR" >&2; fi
  exit "$rc"
}
trap e2e_cleanup EXIT

fail() {
  echo "FAIL $E2E_NAME: $*"
  local f
  for f in "$E2E_DIR"/*.log; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done
  exit 1
}

ok() { echo "ok $E2E_NAME${1:+: $1}"; }

# e2e_cluster PORT [postgresql.conf lines...]: cluster + extension.
# fsync off (E2E_FSYNC): on this shared machine's disk one fsync can stall
# past half a second, a 2 s lease's heartbeat timeout (start_worker), and
# the worker then rightly gives up its jobs, failing a test about something
# else.  The tests stop PostgreSQL (even immediately) but never the host,
# so what was written stays written.
E2E_FSYNC="fsync = off"
e2e_cluster() {
  [[ -x $BGEXEC ]] || fail "no binary at $BGEXEC (run scripts/build-daemon.sh)"
  local port=$1; shift
  cluster_start "$E2E_DIR/pg" "$port" "$E2E_FSYNC" "$@" >/dev/null || fail "cluster did not start"
  psql -qX -c "CREATE EXTENSION bgexec" >/dev/null || fail "CREATE EXTENSION bgexec failed"
}

sql() { psql -qXAt -c "$1"; }

# start_worker NAME [ARGS...]: a worker in the background, with a 2 s lease
# unless ARGS give one (a flag given twice is a usage error); its PID in
# WORKER_PID and PID_<NAME>.
start_worker() {
  local name=$1 lease=(--lease 2) a; shift
  for a in "$@"; do [[ $a == --lease || $a == --lease=* ]] && lease=(); done
  "$BGEXEC" worker --id "$name" "${lease[@]}" "$@" >>"$E2E_DIR/$name.log" 2>&1 &
  WORKER_PID=$!
  E2E_PIDS+=("$WORKER_PID")
  printf -v "PID_$name" '%s' "$WORKER_PID"
}

# hold_open: a session of the test, fed one statement at a time (hold SQL;
# held TAG: a row "TAG|..." came back, in $E2E_DIR/hold.out; HOLD_PID its
# pid), opens a transaction; the test ends it with hold "COMMIT;" and closes
# the session (exec 7>&-).
hold_open() {
  mkfifo "$E2E_DIR/hold.in"
  psql -qXAt -v ON_ERROR_STOP=1 -f "$E2E_DIR/hold.in" >"$E2E_DIR/hold.out" 2>&1 &
  HOLD_PID=$!
  E2E_PIDS+=("$HOLD_PID")
  exec 7>"$E2E_DIR/hold.in"
  hold "BEGIN;"
}
# hold_claim_lock WORKER: hold_open, then WORKER's claim lock taken as a
# claim does (shared), so the worker's unclaim returns NULL until the test
# commits.
hold_claim_lock() {
  hold_open
  hold "SELECT 'claim-lock', pg_advisory_xact_lock_shared(hashtext('bgexec.claim.worker'), hashtext('$1'));"
  wait_for 10 held claim-lock || fail "the test's session did not take the claim lock: $(cat "$E2E_DIR/hold.out")"
}
hold() { echo "$1" >&7; }
held() { grep -q "^$1|" "$E2E_DIR/hold.out"; }

# take_id ID HOLDER_PID LOG [WORKER ARGS...]: another process of worker id ID
# (its log LOG, its pid TAKER) waits for the id, which HOLDER_PID holds; the
# holder is stopped, so that its heartbeat cannot register the row again,
# the worker row is deleted, and the new process registers the id.  The
# holder is left stopped: the test continues it (kill -CONT).
take_id() {
  local id=$1 holder=$2 log=$3 name
  shift 3
  name=$(basename "$log" .log)
  "$BGEXEC" worker --id "$id" "$@" >>"$log" 2>&1 &
  TAKER=$!
  E2E_PIDS+=("$TAKER")
  wait_for 20 grep -q 'worker id in use by a live worker: waiting' "$log" || fail "the $name did not wait"
  kill -STOP "$holder"
  sql "DELETE FROM bgexec.worker WHERE id = '$id'" >/dev/null
  wait_for 10 grep -q 'worker started' "$log" || { kill -CONT "$holder"; fail "the $name did not start"; }
}

# wait_for TIMEOUT_S CMD...: polls until CMD succeeds; non-zero on timeout.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# gone PID...: each pid is no process, or a zombie (its new parent, init,
# may be slow to reap it)
gone() {
  local pid state
  for pid in "$@"; do
    state=$(sed -n 's/^[0-9]* (.*) \([A-Z]\) .*/\1/p' "/proc/$pid/stat" 2>/dev/null) || continue
    [[ -z $state || $state == Z ]] || return 1
  done
}

job_status() { sql "SELECT status FROM bgexec.job WHERE id = $1"; }
status_is() { [[ $(job_status "$1") == "$2" ]]; }
# job_ended ID: the job is in a terminal status.
job_ended() { [[ $(job_status "$1") =~ ^(completed|failed|cancelled|timed_out)$ ]]; }
# wait_status ID STATUS [TIMEOUT_S]
wait_status() {
  wait_for "${3:-30}" status_is "$1" "$2" || fail "job $1 is $(job_status "$1"), expected $2"
}

# start_proxy SCRIPT [ARGS...]: test/e2e/SCRIPT (a proxy of e2e_proxy.py's)
# on a port of 127.0.0.1 the kernel picks, in front of this test's cluster,
# given ARGS after its port file and the cluster's socket.  PROXIED: the
# conninfo through it, once it answers.  (-B: no __pycache__ in the tree.)
start_proxy() {
  local script=$1; shift
  rm -f "$E2E_DIR/proxy.port"
  python3 -B "$E2E_ROOT/test/e2e/$script" "$E2E_DIR/proxy.port" "$E2E_DIR/pg/.s.PGSQL.$PGPORT" "$@" \
    >"$E2E_DIR/proxy.log" 2>&1 &
  E2E_PIDS+=("$!")
  wait_for 10 test -s "$E2E_DIR/proxy.port" || fail "proxy did not start"
  PROXIED="host=127.0.0.1 port=$(cat "$E2E_DIR/proxy.port") dbname=postgres user=postgres"
  wait_for 10 psql -qXAt "$PROXIED" -c "SELECT 1" || fail "proxy did not start"
}

# start_cut_proxy MARKER request|reply|commit|commit-sent: start_proxy of
# cut-reply-proxy.py, losing the reply of the statement that carries MARKER
# (request), whose reply does (reply), or that ends the transaction of the
# statement that carries it (commit; commit-sent: the client cut as soon as
# that COMMIT is sent, the server left to commit); $E2E_DIR/cut appears
# when it has.
start_cut_proxy() { start_proxy cut-reply-proxy.py "$1" "$2" "$E2E_DIR/cut"; }

# start_gateway [SERVE-ARGS...]: bgexec serve on a port of 127.0.0.1 the
# kernel picks, with one token "t" for the superuser
# ($E2E_DIR/tokens.json), its log in $E2E_DIR/serve.log; url: its address.
start_gateway() {
  echo '{"t": "postgres"}' >"$E2E_DIR/tokens.json"
  "$BGEXEC" serve --listen 127.0.0.1:0 --tokens "$E2E_DIR/tokens.json" "$@" >>"$E2E_DIR/serve.log" 2>&1 &
  E2E_PIDS+=($!)
  wait_for 10 grep -q 'msg=serving' "$E2E_DIR/serve.log" || fail "serve did not start"
  url=http://$(sed -n 's/.*msg=serving listen=\([0-9.:]*\).*/\1/p' "$E2E_DIR/serve.log" | head -1)
}

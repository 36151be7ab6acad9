# Throwaway PostgreSQL 15 clusters for tests, demo and bench.
# Source this file.  PostgreSQL refuses to run as root, so the cluster runs
# as the `postgres` OS user, on a private port and a private socket directory.
# cluster_stop stops exactly the postmaster cluster_start started (by pid);
# stop_pids the daemons a script started against it.

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}

# cluster_start DIR PORT [extra postgresql.conf lines...]: initdb + start.
# The cluster listens on its Unix socket in DIR only: PORT then names the
# socket file and nothing else, so no program on the host can hold it.  (A
# TCP port in 32768-60999, where the tests' fixed numbers are, is the
# kernel's ephemeral range: any outgoing connection on the host may be using
# it at that moment, and bind fails.)  A caller that needs TCP passes
# "listen_addresses = '127.0.0.1'" and PORT auto: a port the kernel says is
# free, picked again if another program binds it first.  PGPORT holds the
# port in use.
cluster_start() {
  local dir=$1 port=$2; shift 2
  mkdir -p "$dir"
  local as=()
  if [[ $(id -u) -eq 0 ]]; then
    # mktemp -d makes 0700 directories: let the postgres user through.
    chmod a+x "$(dirname "$dir")"
    chown postgres:postgres "$dir"
    chmod 755 "$dir"
    as=(runuser -u postgres --)
  fi
  "${as[@]}" "$PGBIN/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; return 1; }
  local auto=0 try
  [[ $port == auto ]] && { auto=1; port=$(free_port); }
  {
    echo "port = $port"
    echo "listen_addresses = ''"
    echo "unix_socket_directories = '$dir'"
    echo "max_connections = 300"
    echo "shared_preload_libraries = 'bgexec'"
    echo "logging_collector = off"
    echo "log_min_messages = warning"
    for line in "$@"; do echo "$line"; done
  } >>"$dir/data/postgresql.conf"
  for try in 1 2 3 4 5; do
    "${as[@]}" "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start >/dev/null 2>"$dir/pg_ctl.err" && break
    if ((auto && try < 5)) && grep -q 'could not bind' "$dir/postgres.log"; then
      port=$(free_port)
      echo "port = $port" >>"$dir/data/postgresql.conf"  # the last setting wins
      continue
    fi
    cat "$dir/pg_ctl.err" "$dir/postgres.log" >&2
    return 1
  done
  head -1 "$dir/data/postmaster.pid" >"$dir/postmaster.pid.started"
  export PGHOST=$dir PGPORT=$port PGUSER=postgres
}

# cluster_stop DIR: fast shutdown of the postmaster started by cluster_start.
cluster_stop() {
  local dir=$1 pid
  [[ -f "$dir/postmaster.pid.started" ]] || return 0
  pid=$(cat "$dir/postmaster.pid.started")
  if kill -0 "$pid" 2>/dev/null; then
    kill -INT "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -QUIT "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/postmaster.pid.started"
}

# cluster_restart DIR: immediate stop + start of the same data directory (e2e).
cluster_restart() {
  local dir=$1 pid as=()
  [[ $(id -u) -eq 0 ]] && as=(runuser -u postgres --)
  pid=$(cat "$dir/postmaster.pid.started")
  kill -QUIT "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  "${as[@]}" "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start >/dev/null
  head -1 "$dir/data/postmaster.pid" >"$dir/postmaster.pid.started"
}

# stop_pids PID...: SIGTERM to each (a worker drains), up to 5 s for each to
# exit, then SIGKILL.  Only the pids given: never by name.
stop_pids() {
  local p
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "$@"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
}

# free_port: a TCP port of 127.0.0.1 free at this moment (the kernel's pick).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# scratch_dir NAME: a fresh WORK=/tmp/bgexec-NAME.XXXXXX, an empty pids array
# for the daemons the script starts, and an EXIT trap that stops those
# daemons (stop_pids), the cluster in $WORK/cluster, and removes WORK.
scratch_dir() {
  WORK=$(mktemp -d "/tmp/bgexec-$1.XXXXXX")
  pids=()
  trap scratch_cleanup EXIT
}
scratch_cleanup() {
  stop_pids "${pids[@]}"
  cluster_stop "$WORK/cluster"
  rm -rf "$WORK"
}

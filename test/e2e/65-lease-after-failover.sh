#!/usr/bin/env bash
# A lease is never handed out twice, across an asynchronous failover and a
# restore too (invariants 2 and 3).  A promoted standby knows lease_seq only
# as far as WAL reached it, and a restore set it back to the dump's value:
# the same job claimed again got a lease the old primary (or the source
# database) had already given, and a stale worker still holding it had its
# finish accepted.  Here the standby stops receiving WAL, the old primary
# hands out 100 leases it never sees and then one for job X, and the
# standby is promoted: its claim of X must get a larger lease, and the old
# lease's finish must be refused.  Then pg_dump, a lease taken on the source
# after the dump, pg_restore into another database: the same.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57940
P=$PGPORT
S=$E2E_DIR/st
E2E_CLUSTERS+=("$S")
as_pg() { runuser -u postgres -- "$@"; }
[[ $(id -u) -eq 0 ]] || as_pg() { "$@"; }

sql "SELECT bgexec.submit('noop', queue => 'fo') FROM generate_series(1, 3)" >/dev/null
x=$(sql "SELECT min(id) FROM bgexec.job WHERE queue = 'fo'")
y=$((x + 1))
# A claim and finish before the standby is cut off: lease_seq's WAL reaches it.
sql "SELECT bgexec.register_worker('a', '{fo}', 4)" >/dev/null

mkdir -p "$S" && chmod 755 "$S"; [[ $(id -u) -eq 0 ]] && chown postgres:postgres "$S"
as_pg "$PGBIN/pg_basebackup" -h "$E2E_DIR/pg" -p "$P" -U postgres -D "$S/data" -R -X stream >"$E2E_DIR/basebackup.log" 2>&1 \
  || fail "pg_basebackup: $(cat "$E2E_DIR/basebackup.log")"
{ echo "port = 57939"; echo "unix_socket_directories = '$S'"; } >>"$S/data/postgresql.conf"
as_pg "$PGBIN/pg_ctl" -D "$S/data" -l "$S/postgres.log" -w -t 60 start >/dev/null || fail "the standby did not start"
head -1 "$S/data/postmaster.pid" >"$S/postmaster.pid.started"
caught_up() { [[ $(psql -qXAt -h "$S" -p 57939 -c "SELECT pg_last_wal_replay_lsn() >= '$1'") == t ]]; }
lsn=$(sql "SELECT pg_current_wal_lsn()")
wait_for 30 caught_up "$lsn" || fail "the standby did not catch up"
# A worker pointed at the standby waits and retries, saying why in one short
# line: the server's message, 25006 and a hint, not register_worker's call
# stack (a kilobyte a line).
start_worker onstandby --db "host=$S port=57939 dbname=postgres user=postgres" --queue fo
standby_said() { grep -q 'database unavailable, retrying.*sqlstate=25006.*target_session_attrs' "$E2E_DIR/onstandby.log"; }
wait_for 15 standby_said || fail "the worker on the standby: $(cat "$E2E_DIR/onstandby.log")"
kill "$PID_onstandby"; wait "$PID_onstandby" || true
longest=$(awk '{ if (length($0) > n) n = length($0) } END { print n + 0 }' "$E2E_DIR/onstandby.log")
((longest < 600)) || fail "the worker on the standby logged a line of $longest characters"
ok "a worker on the standby retries, in lines of at most $longest characters"
# A gateway on the standby answers an event stream at once: LISTEN is
# refused there, and every stream waited 5 s for it before its first byte.
done_id=$(sql "SELECT bgexec.submit('noop', queue => 'sb')")
sql "SELECT bgexec.stop($done_id)" >/dev/null
wait_for 30 caught_up "$(sql "SELECT pg_current_wal_lsn()")" || fail "the standby did not catch up"
echo '{"t": "postgres"}' >"$E2E_DIR/tokens.json"
"$BGEXEC" serve --db "host=$S port=57939 dbname=postgres user=postgres" --listen 127.0.0.1:0 \
  --tokens "$E2E_DIR/tokens.json" >>"$E2E_DIR/serve.log" 2>&1 &
serve_pid=$!
E2E_PIDS+=("$serve_pid")
wait_for 10 grep -q 'msg=serving' "$E2E_DIR/serve.log" || fail "serve did not start: $(cat "$E2E_DIR/serve.log")"
url=http://$(sed -n 's/.*msg=serving listen=\([0-9.:]*\).*/\1/p' "$E2E_DIR/serve.log" | head -1)
refused() { grep -q 'cannot execute LISTEN during recovery' "$E2E_DIR/serve.log"; }
wait_for 15 refused || fail "the gateway's LISTEN on the standby: $(cat "$E2E_DIR/serve.log")"
took=$(curl -s -m 20 -o "$E2E_DIR/stream.txt" -w '%{http_code} %{time_total}' -H "Authorization: Bearer t" "$url/v1/jobs/$done_id/events")
[[ ${took% *} == 200 ]] && grep -q '^event: cancelled' "$E2E_DIR/stream.txt" || fail "the stream of job $done_id on the standby: $took $(cat "$E2E_DIR/stream.txt")"
awk -v t="${took#* }" 'BEGIN {exit !(t < 3)}' || fail "the stream of an ended job on the standby took ${took#* } s"
kill "$serve_pid"; wait "$serve_pid" || true
ok "a gateway on the standby streamed an ended job's events in ${took#* } s"
as_pg "$PGBIN/pg_ctl" -D "$S/data" -w -t 60 stop -m fast >/dev/null || fail "stopping the standby"

# The old primary, alone: 100 leases and then job X's, none of them replicated.
sql "SELECT count(pg_catalog.nextval('bgexec.lease_seq')) FROM generate_series(1, 100)" >/dev/null
old=$(sql "SELECT lease FROM bgexec.claim('a', '{fo}', 1) WHERE job_id = $x")
[[ $old =~ ^[0-9]+$ ]] || fail "the old primary's claim of job $x: '$old'"
as_pg "$PGBIN/pg_ctl" -D "$E2E_DIR/pg/data" -w -t 60 stop -m immediate >/dev/null || fail "stopping the primary"
rm -f "$E2E_DIR/pg/postmaster.pid.started"   # stopped: cleanup must not signal its pid

# Promote the standby; the worker's claim of X there.
as_pg "$PGBIN/pg_ctl" -D "$S/data" -l "$S/postgres.log" -w -t 60 start >/dev/null || fail "the standby did not start again"
head -1 "$S/data/postmaster.pid" >"$S/postmaster.pid.started"
as_pg "$PGBIN/pg_ctl" -D "$S/data" -w -t 60 promote >/dev/null || fail "promote"
export PGHOST=$S PGPORT=57939
[[ $(sql "SELECT status FROM bgexec.job WHERE id = $x") == queued ]] || fail "job $x on the promoted standby: $(job_status "$x")"
sql "SELECT bgexec.register_worker('b', '{fo}', 4)" >/dev/null
new=$(sql "SELECT lease FROM bgexec.claim('b', '{fo}', 1) WHERE job_id = $x")
[[ $new =~ ^[0-9]+$ ]] || fail "the new primary's claim of job $x: '$new'"
((new > old)) || fail "the promoted standby handed out lease $new, not above the old primary's $old"
[[ -z $(sql "SELECT bgexec.finish($x, $old, 'completed', '{\"result\": \"stale\"}')") ]] \
  || fail "the old primary's lease $old finished job $x on the new one"
status_is "$x" running || fail "job $x is $(job_status "$x") after a stale finish"
ok "after the failover job $x got lease $new (the lost timeline's was $old); the stale finish was refused"

# Restore: a lease taken on the source after the dump is not handed out again.
as_pg "$PGBIN/pg_dump" -h "$S" -p 57939 -U postgres -Fc -f "$S/dump" postgres 2>"$E2E_DIR/dump.log" \
  || fail "pg_dump: $(cat "$E2E_DIR/dump.log")"
src=$(sql "SELECT lease FROM bgexec.claim('b', '{fo}', 1) WHERE job_id = $y")
[[ $src =~ ^[0-9]+$ ]] || fail "the source's claim of job $y: '$src'"
sql "CREATE DATABASE copy" >/dev/null
as_pg "$PGBIN/pg_restore" -h "$S" -p 57939 -U postgres -d copy "$S/dump" 2>"$E2E_DIR/restore.log" \
  || fail "pg_restore: $(cat "$E2E_DIR/restore.log")"
export PGDATABASE=copy
[[ $(sql "SELECT status FROM bgexec.job WHERE id = $y") == queued ]] || fail "job $y in the copy: $(job_status "$y")"
sql "SELECT bgexec.register_worker('c', '{fo}', 4)" >/dev/null
got=$(sql "SELECT lease FROM bgexec.claim('c', '{fo}', 1) WHERE job_id = $y")
((got > src)) || fail "the restored copy handed out lease $got, not above the source's $src"
[[ -z $(sql "SELECT bgexec.finish($y, $src, 'completed', '{\"result\": \"stale\"}')") ]] \
  || fail "the source's lease $src finished job $y in the copy"
ok "after the restore job $y got lease $got (the source's was $src); the stale finish was refused"

# A copy of the data directory started as it is (a file system or VM
# snapshot, a base backup without recovery.signal): crash recovery to the
# copy's point, on the same timeline.  A lease the original handed out
# after the copy is not handed out again: every server start moves
# lease_seq past the earlier leases, as a new timeline does.
export PGDATABASE=postgres
z=$((x + 2))
[[ $(sql "SELECT status FROM bgexec.job WHERE id = $z") == queued ]] || fail "job $z before the copy: $(job_status "$z")"
C=$E2E_DIR/copy
E2E_CLUSTERS+=("$C")
mkdir -p "$C" && chmod 755 "$C"; [[ $(id -u) -eq 0 ]] && chown postgres:postgres "$C"
as_pg "$PGBIN/pg_basebackup" -h "$S" -p 57939 -U postgres -D "$C/data" -X stream >"$E2E_DIR/copy.log" 2>&1 \
  || fail "pg_basebackup of the copy: $(cat "$E2E_DIR/copy.log")"
{ echo "port = 57938"; echo "unix_socket_directories = '$C'"; } >>"$C/data/postgresql.conf"
tl=$(sql "SELECT timeline_id FROM pg_control_checkpoint()")
sql "SELECT count(pg_catalog.nextval('bgexec.lease_seq')) FROM generate_series(1, 100)" >/dev/null
orig=$(sql "SELECT lease FROM bgexec.claim('b', '{fo}', 1) WHERE job_id = $z")
[[ $orig =~ ^[0-9]+$ ]] || fail "the original's claim of job $z: '$orig'"
as_pg "$PGBIN/pg_ctl" -D "$S/data" -w -t 60 stop -m immediate >/dev/null || fail "stopping the original"
rm -f "$S/postmaster.pid.started"
as_pg "$PGBIN/pg_ctl" -D "$C/data" -l "$C/postgres.log" -w -t 60 start >/dev/null || fail "the copy did not start: $(tail -5 "$C/postgres.log")"
head -1 "$C/data/postmaster.pid" >"$C/postmaster.pid.started"
export PGHOST=$C PGPORT=57938
[[ $(sql "SELECT timeline_id FROM pg_control_checkpoint()") == "$tl" ]] || fail "the copy is not on the original's timeline $tl"
[[ $(sql "SELECT status FROM bgexec.job WHERE id = $z") == queued ]] || fail "job $z in the copy: $(job_status "$z")"
sql "SELECT bgexec.register_worker('d', '{fo}', 4)" >/dev/null
copy=$(sql "SELECT lease FROM bgexec.claim('d', '{fo}', 1) WHERE job_id = $z")
[[ $copy =~ ^[0-9]+$ ]] || fail "the copy's claim of job $z: '$copy'"
((copy > orig)) || fail "the copy handed out lease $copy, not above the original's $orig"
[[ -z $(sql "SELECT bgexec.finish($z, $orig, 'completed', '{\"result\": \"stale\"}')") ]] \
  || fail "the original's lease $orig finished job $z in the copy"
status_is "$z" running || fail "job $z is $(job_status "$z") after a stale finish"
ok "in a copy started as it is, job $z got lease $copy (the original's was $orig); the stale finish was refused"

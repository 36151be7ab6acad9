#!/usr/bin/env bash
# 113-claim-second-pass-locks: a claim of a capped queue leaves no job
# locked that it did not take.  Its first pass locks the jobs the caps
# admit in one statement; when another transaction holds one, a second
# pass walks again and locks a job at a time.  That walk is a new
# statement, so jobs committed between the passes ahead of the first
# pass's rows could fill the claim: those rows stayed locked, untaken,
# until the claim committed, every other claimer's SKIP LOCKED passing
# over them.  Now the second pass takes the first pass's rows first.
# Load, 20 s: a holder locking the queue's head job for 3 ms at a time; a
# submitter of two jobs at a time, each of a higher priority than all
# before (ahead of every queued job; with fsync on, ~250 commits/s: much
# faster and the head moves on before a claim meets the held job); two
# claimers of 2 over a backlog of 10 000 priorities, each counting, before
# it rolls back (the queue stays as it is), the queued jobs its
# transaction holds locked (xmax its own xid) in a sequence (not rolled
# back).  8bf373c: 3-12 of ~3 000 jobs claimed in each of 3 runs (the race
# is a window of microseconds: a run may find fewer); now none, by
# construction.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58413 "fsync = on"

psql -qX -v ON_ERROR_STOP=1 >/dev/null <<'SQL' || fail "setup failed"
SELECT bgexec.configure_queue('q', max_running => 100000);
CREATE SEQUENCE prio;
CREATE SEQUENCE claims;
CREATE SEQUENCE untaken;
-- a backlog of 10 000 priorities (each claim's walk reads its window a
-- priority at a time: a claim long enough for submits to land in it)
INSERT INTO bgexec.job (queue, kind, owner, priority)
SELECT 'q', 'noop', current_user, -g FROM generate_series(1, 10000) g;
SQL
cat >"$E2E_DIR/holder.sql" <<'SQL'
BEGIN;
SELECT 1 FROM bgexec.job WHERE queue = 'q' AND status = 'queued' ORDER BY priority DESC, run_after, id LIMIT 1 FOR UPDATE SKIP LOCKED;
SELECT pg_sleep(0.003);
ROLLBACK;
SQL
cat >"$E2E_DIR/submitter.sql" <<'SQL'
INSERT INTO bgexec.job (queue, kind, owner, priority)
SELECT 'q', 'noop', current_user, nextval('prio')::int FROM generate_series(1, 2);
SQL
cat >"$E2E_DIR/claimer.sql" <<'SQL'
BEGIN;
SELECT nextval('claims') FROM bgexec.claim('w', '{q}', 2);
SELECT nextval('untaken') FROM bgexec.job j
 WHERE j.queue = 'q' AND j.status = 'queued' AND j.xmax = pg_current_xact_id()::xid;
ROLLBACK;
SQL
pids=()
"$PGBIN/pgbench" -n -c 1 -T 20 -f "$E2E_DIR/holder.sql" >"$E2E_DIR/holder.log" 2>&1 &
pids+=($!); E2E_PIDS+=($!)
"$PGBIN/pgbench" -n -c 1 -T 20 -f "$E2E_DIR/submitter.sql" >"$E2E_DIR/submitter.log" 2>&1 &
pids+=($!); E2E_PIDS+=($!)
"$PGBIN/pgbench" -n -c 2 -T 20 -f "$E2E_DIR/claimer.sql" >"$E2E_DIR/claimer.log" 2>&1 || fail "claimers failed"
for p in "${pids[@]}"; do wait "$p" || fail "load failed"; done
claims=$(psql -qXAt -c "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM claims")
((claims > 200)) || fail "only $claims jobs claimed under load"
held=$(psql -qXAt -c "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM untaken")
[[ $held == 0 ]] || fail "$held jobs left locked, not taken, by claims (of $claims jobs claimed)"
ok "$claims jobs claimed, none left locked untaken"

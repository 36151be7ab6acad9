#!/usr/bin/env bash
# bench/floor.sh: what the drain's data model costs on this machine, with no
# bgexec function and no daemon in the way (bench/README.md, "The floor").
#
# Each variant drains noop jobs with the bare SQL that claim + finish_many
# reduce to: one transaction claims a batch of queued rows (FOR UPDATE SKIP LOCKED)
# and writes their 'started' events, the next finishes them and writes their
# 'completed' events.  The tables are copies of bgexec.job and
# bgexec.job_event (columns, defaults, CHECK constraints) in a scratch schema.
#   design       the schema as it is: five partial indexes on the hot path,
#                two event rows per job
#   one_event    no 'started' event row (one event per job)
#   lean_index   only the primary key, job_runnable_idx and job_finished_idx
#   both         one event row and the lean indexes
# The reference is bgexec bench's: pgbench TPS of a one-row UPDATE at 16
# clients on a 1000-row table.  Rounds are interleaved (the machine is
# shared and noisy) and each figure is the median of its rounds.
#
# Usage: bench/floor.sh   (database from the libpq PG* variables, bgexec
# installed, a superuser; the scratch schema bgexec_floor is dropped after)
# FLOOR_ROUNDS (default 3), FLOOR_SECONDS (default 6), FLOOR_CLIENTS
# (default 2: one per worker of bgexec bench's default), FLOOR_BATCH (jobs per
# claim, default 64), FLOOR_JOBS (default 300000, more than a run drains).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${FLOOR_ROUNDS:-3}
secs=${FLOOR_SECONDS:-6}
clients=${FLOOR_CLIENTS:-2}
jobs=${FLOOR_JOBS:-300000}
batch=${FLOOR_BATCH:-64}
pgbench=${PGBENCH:-/usr/lib/postgresql/15/bin/pgbench}
variants=(design one_event lean_index both)
tmp=$(mktemp -d /tmp/bgexec-floor.XXXXXX)
chmod 755 "$tmp"
sql() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
cleanup() {
  sql -c "DROP SCHEMA IF EXISTS bgexec_floor CASCADE" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

sql <<'SQL'
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS bgexec_floor CASCADE;
CREATE SCHEMA bgexec_floor;
CREATE SEQUENCE bgexec_floor.lease_seq;
CREATE TABLE bgexec_floor.ref (id int PRIMARY KEY, v int NOT NULL DEFAULT 0);
INSERT INTO bgexec_floor.ref (id) SELECT generate_series(1, 1000);
SQL
for v in "${variants[@]}"; do
  sql <<SQL
CREATE TABLE bgexec_floor.job_$v (LIKE bgexec.job INCLUDING DEFAULTS INCLUDING IDENTITY
  INCLUDING CONSTRAINTS) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0.05);
ALTER TABLE bgexec_floor.job_$v ADD PRIMARY KEY (id);
CREATE INDEX ON bgexec_floor.job_$v (queue, priority DESC, run_after, id) WHERE status = 'queued';
CREATE INDEX ON bgexec_floor.job_$v (finished_at) WHERE finished_at IS NOT NULL;
CREATE TABLE bgexec_floor.event_$v (LIKE bgexec.job_event INCLUDING ALL)
  WITH (autovacuum_vacuum_scale_factor = 0.05);
SQL
  if [[ $v == design || $v == one_event ]]; then
    sql <<SQL
CREATE UNIQUE INDEX ON bgexec_floor.job_$v (lease) WHERE status = 'running';
CREATE INDEX ON bgexec_floor.job_$v (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE INDEX ON bgexec_floor.job_$v (deadline) WHERE lease IS NOT NULL AND deadline IS NOT NULL;
CREATE INDEX ON bgexec_floor.job_$v (queue, concurrency_key) WHERE status = 'running';
CREATE INDEX ON bgexec_floor.job_$v (queue) WHERE status = 'suspended';
SQL
  fi
  started="e AS (INSERT INTO bgexec_floor.event_$v (job_id, seq, kind, data)
    SELECT id, last_seq, 'started', jsonb_build_object('attempt', attempt, 'worker', 'w', 'lease', lease) FROM c)"
  seq_bump=", last_seq = j.last_seq + 1"
  if [[ $v == one_event || $v == both ]]; then started=""; seq_bump=""; fi
  cat >"$tmp/$v.sql" <<SQL
BEGIN;
WITH c AS (
  UPDATE bgexec_floor.job_$v j
     SET status = 'running', lease = nextval('bgexec_floor.lease_seq'), lease_owner = 'w',
         lease_expires_at = now() + interval '30 s', attempt = j.attempt + 1,
         started_at = now(), deadline = now() + j.timeout$seq_bump
   WHERE j.id IN (SELECT q.id FROM bgexec_floor.job_$v q
                   WHERE q.status = 'queued' AND q.queue = 'floor' AND q.run_after <= now()
                   ORDER BY q.priority DESC, q.run_after, q.id LIMIT $batch FOR UPDATE SKIP LOCKED)
  RETURNING j.id, j.last_seq, j.lease, j.attempt)${started:+,
$started}
SELECT string_agg(id || ':' || lease, ',') AS items FROM c \gset
COMMIT;
BEGIN;
WITH it AS (
  SELECT split_part(x, ':', 1)::bigint AS id, split_part(x, ':', 2)::bigint AS lease
    FROM unnest(string_to_array(':items', ',')) x),
d AS (
  UPDATE bgexec_floor.job_$v j
     SET status = 'completed', result = '{}', finished_at = now(), lease = NULL,
         lease_owner = NULL, lease_expires_at = NULL, last_seq = j.last_seq + 1
    FROM it WHERE j.id = it.id AND j.lease = it.lease AND j.status = 'running'
  RETURNING j.id, j.last_seq, j.result)
INSERT INTO bgexec_floor.event_$v (job_id, seq, kind, data)
SELECT id, last_seq, 'completed', jsonb_build_object('result', result) FROM d;
COMMIT;
SQL
done
cat >"$tmp/ref.sql" <<'SQL'
\set id random(1, 1000)
UPDATE bgexec_floor.ref SET v = v + 1 WHERE id = :id;
SQL

tps() { "$pgbench" -n "$@" 2>&1 | awk '$1 == "tps" {print $3}'; }
fill() {
  sql -c "TRUNCATE bgexec_floor.job_$1, bgexec_floor.event_$1" \
      -c "INSERT INTO bgexec_floor.job_$1 (queue, kind, owner)
          SELECT 'floor', 'noop', current_user FROM generate_series(1, $jobs)" \
      -c "VACUUM ANALYZE bgexec_floor.job_$1" -c "CHECKPOINT" >/dev/null
}
echo "floor: $rounds rounds, ${secs} s each, $clients clients, batches of $batch" >&2
for r in $(seq 1 "$rounds"); do
  echo "ref $(tps -c 16 -j 16 -T "$secs" -f "$tmp/ref.sql")" >>"$tmp/results"
  for v in "${variants[@]}"; do
    fill "$v"
    t=$(tps -c "$clients" -j "$clients" -T "$secs" -f "$tmp/$v.sql")
    left=$(psql -X -At -c "SELECT count(*) FROM bgexec_floor.job_$v WHERE status = 'queued'")
    [[ $left -gt 0 ]] || { echo "floor: $v drained all $jobs jobs; raise FLOOR_JOBS" >&2; exit 1; }
    echo "$v $(awk -v t="$t" -v b="$batch" 'BEGIN {print t * b}')" >>"$tmp/results"
  done
  echo "floor: round $r: $(tail -n 5 "$tmp/results" | tr '\n' ' ')" >&2
done

awk "$MEDIAN_AWK"'
  END {
    ref = median("ref")
    printf "%-12s %10s %8s\n", "variant", "jobs/s", "ratio"
    printf "%-12s %10.0f %8s\n", "reference", ref, "tps"
    split("design one_event lean_index both", order, " ")
    for (i = 1; i <= 4; i++) printf "%-12s %10.0f %7.2fx\n", order[i], median(order[i]), median(order[i]) / ref
  }' "$tmp/results"

#!/usr/bin/env bash
# bench/claim-heads-ab.sh OLD_REV BGEXEC [PAIRS]: A/B of claim() over many
# queues (bench/README.md, the fifty-fifth round): the claim function of
# OLD_REV's sql/bgexec--0.1.0.sql (A) against the working tree's (B),
# swapped by CREATE OR REPLACE in one throwaway cluster (the installed
# extension, PGBIN), runs interleaved A B, B A, ... PAIRS times (default 5).
# Each run, one line per case:
#   empty    claim(…, 4) over 2 000 empty queues and one with a job, rolled
#            back (pgbench -c 1 -T 3: ms a claim)
#   busy     the same over 2 000 queues of 3 jobs each
#   one64    claim(…, 64) of one queue of 100 000+ jobs, rolled back (tps)
#   cf       bench/claim-finish.sql on that queue (-c 2 -j 2 -T 3, tps),
#            refilled to 120 000 and VACUUM FULL before each run
#   drain    20 000 noop jobs over 2 000 queues (10 each), submitted at
#            once, drained by 4 workers of BGEXEC (--concurrency 10, every
#            queue listed): seconds from the submit's commit to the last
#            job's end
# Output: "case side value" lines, then the medians.  Then, as load on the
# host moves runs apart, the same claims in one session with A (as
# bgexec.claim_a) and B called alternately, each rolled back in a
# subtransaction, 60 each (p50 and mean ms a call).
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 BGEXEC=$2 PAIRS=${3:-5}
source scripts/lib/cluster.sh
source bench/lib.sh
workers=()
claim_ab_start claim-heads "$OLD" 5432
cleanup() {
  local p
  for p in "${workers[@]}"; do kill "$p" 2>/dev/null || true; done
  claim_ab_cleanup
}
trap cleanup EXIT
q <<'SQL'
CREATE EXTENSION bgexec;
CREATE TABLE ab_q (k text PRIMARY KEY, qs text[] NOT NULL);
INSERT INTO ab_q VALUES
  ('empty', ARRAY(SELECT 'he' || g FROM generate_series(1, 2000) g) || '{hz}'),
  ('busy', ARRAY(SELECT 'hb' || g FROM generate_series(1, 2000) g)),
  ('drain', ARRAY(SELECT 'hd' || g FROM generate_series(1, 2000) g));
INSERT INTO bgexec.job (queue, kind, owner) VALUES ('hz', 'noop', current_user);
INSERT INTO bgexec.job (queue, kind, owner)
SELECT 'hb' || g, 'noop', current_user FROM generate_series(1, 2000) g, generate_series(1, 3) i;
SQL
cat >"$WORK/empty.sql" <<'SQL'
BEGIN;
SELECT count(*) FROM bgexec.claim('ab', (SELECT qs FROM ab_q WHERE k = 'empty'), 4);
ROLLBACK;
SQL
sed 's/empty/busy/' "$WORK/empty.sql" >"$WORK/busy.sql"
cat >"$WORK/one64.sql" <<'SQL'
BEGIN;
SELECT count(*) FROM bgexec.claim('ab', '{pq}', 64);
ROLLBACK;
SQL
tps() { "$PGBIN/pgbench" -n "$@" -d postgres 2>/dev/null | awk '/^tps/ {print $3}'; }
run() {
  local side=$1 t0 t1 left
  q -f "$WORK/claim-$side.sql"
  q -c "VACUUM bgexec.job"
  echo "empty $side $(tps -c 1 -T 3 -f "$WORK/empty.sql" | awk '{printf "%.3f", 1000 / $1}')"
  echo "busy $side $(tps -c 1 -T 3 -f "$WORK/busy.sql" | awk '{printf "%.3f", 1000 / $1}')"
  q <<'SQL'
DELETE FROM bgexec.job WHERE queue = 'pq';
INSERT INTO bgexec.job (queue, kind, owner) SELECT 'pq', 'noop', current_user FROM generate_series(1, 120000);
VACUUM FULL bgexec.job;
SQL
  echo "one64 $side $(tps -c 1 -T 3 -f "$WORK/one64.sql")"
  echo "cf $side $(tps -c 2 -j 2 -T 3 -f bench/claim-finish.sql)"
  q -c "DELETE FROM bgexec.job WHERE queue = 'pq'" -c "VACUUM bgexec.job"
  local list
  list=$(q -At -c "SELECT array_to_string(qs, ',') FROM ab_q WHERE k = 'drain'")
  workers=()
  local i
  for i in 1 2 3 4; do
    "$BGEXEC" worker --id "ab-$i" --queue "$list" --concurrency 10 >"$WORK/worker-$i.log" 2>&1 &
    workers+=($!)
  done
  sleep 2
  t0=$(date +%s.%N)
  q -c "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'hd' || g)) FROM generate_series(1, 2000) g, generate_series(1, 10) i))" >/dev/null
  while :; do
    left=$(q -At -c "SELECT count(*) FROM bgexec.job WHERE queue LIKE 'hd%' AND status IN ('queued', 'running')")
    [[ $left == 0 ]] && break
    sleep 0.1
  done
  t1=$(date +%s.%N)
  echo "drain $side $(echo "$t1 - $t0" | bc)"
  for i in "${workers[@]}"; do kill "$i" 2>/dev/null || true; wait "$i" 2>/dev/null || true; done
  workers=()
  q -c "DELETE FROM bgexec.job WHERE queue LIKE 'hd%'" -c "VACUUM bgexec.job"
}
ab_pairs run "$PAIRS"
{ claim_ab_session; cat <<'SQL'
INSERT INTO bgexec.job (queue, kind, owner) SELECT 'pq', 'noop', current_user FROM generate_series(1, 20000);
VACUUM ANALYZE bgexec.job;
CREATE TEMP TABLE r (k text, side text, ms float8);
DO $$
DECLARE
	e text[] := (SELECT qs FROM ab_q WHERE k = 'empty');
	b text[] := (SELECT qs FROM ab_q WHERE k = 'busy');
	o text[];
BEGIN
	FOR i IN 1..63 LOOP
		o := CASE WHEN i % 2 = 0 THEN '{A,B}'::text[] ELSE '{B,A}' END;
		INSERT INTO r SELECT 'empty', x, pg_temp.t(x, e, 4) FROM unnest(o) x WHERE i > 3;
		INSERT INTO r SELECT 'busy', x, pg_temp.t(x, b, 4) FROM unnest(o) x WHERE i > 3;
		INSERT INTO r SELECT 'one64', x, pg_temp.t(x, '{pq}', 64) FROM unnest(o) x WHERE i > 3;
	END LOOP;
END $$;
SQL
claim_ab_summary; } | q

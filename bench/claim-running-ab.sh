#!/usr/bin/env bash
# bench/claim-running-ab.sh OLD_REV [PAIRS]: A/B of claim() from a queue
# with max_running and many running jobs (bench/README.md, the fifty-sixth
# round): the claim function of OLD_REV's sql/bgexec--0.1.0.sql (A)
# against the working tree's (B), swapped by CREATE OR REPLACE in one
# throwaway cluster (the installed extension, PGBIN), runs interleaved
# A B, B A, ... PAIRS times (default 3).  Each run, one line per case, ms a
# claim (pgbench -c 1 -T 3, each claim rolled back):
#   run5k   claim(…, 1) of a queue with max_running 6 000, 5 000 running,
#           1 000 queued (takes one)
#   full5k  claim(…, 4) of a queue with max_running 5 000, 5 000 running,
#           100 queued (at its cap: takes none)
#   over5k  claim(…, 4) of a queue with 5 000 running, 100 queued, whose
#           max_running was lowered to 100 since (over its cap: takes none)
#   small   claim(…, 4) of a queue with max_running 10, 2 running, 1 000
#           queued (takes four)
#   cap500  claim(…, 4) over 500 queues with max_running 10, 3 queued each
#           (the isolation level checked once, not 501 times)
# The running jobs' rows are left unvacuumed (as claims leave them: the
# count visits each one's heap page).
# Output: "case side value" lines, then the medians; then the same claims
# in one session with A (as bgexec.claim_a) and B called alternately, each
# rolled back in a subtransaction, 100 each (p50 and mean ms a call).
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 PAIRS=${2:-3} PORT=${PORT:-5432}
source scripts/lib/cluster.sh
source bench/lib.sh
claim_ab_start claim-running "$OLD" "$PORT" "autovacuum = off"
q <<'SQL'
CREATE EXTENSION bgexec;
SELECT (bgexec.configure_queue('cr', max_running => 6000)).name;
SELECT (bgexec.configure_queue('cf', max_running => 5000)).name;
SELECT (bgexec.configure_queue('cs', max_running => 10)).name;
SELECT (bgexec.configure_queue('co', max_running => 5000)).name;
INSERT INTO bgexec.job (queue, kind, owner) SELECT 'cr', 'noop', current_user FROM generate_series(1, 6000);
INSERT INTO bgexec.job (queue, kind, owner) SELECT 'cf', 'noop', current_user FROM generate_series(1, 5100);
INSERT INTO bgexec.job (queue, kind, owner) SELECT 'cs', 'noop', current_user FROM generate_series(1, 1002);
INSERT INTO bgexec.job (queue, kind, owner) SELECT 'co', 'noop', current_user FROM generate_series(1, 5100);
SELECT count(*) FROM bgexec.claim('w0', '{cr}', 5000);
SELECT count(*) FROM bgexec.claim('w0', '{cf}', 5000);
SELECT count(*) FROM bgexec.claim('w0', '{cs}', 2);
SELECT count(*) FROM bgexec.claim('w0', '{co}', 5000);
SELECT count(*) FROM generate_series(1, 500) g, bgexec.configure_queue('m' || g, max_running => 10) c;
INSERT INTO bgexec.job (queue, kind, owner)
SELECT 'm' || g, 'noop', current_user FROM generate_series(1, 500) g, generate_series(1, 3) i;
SELECT (bgexec.configure_queue('co', max_running => 100)).name;
ANALYZE bgexec.job;
SQL
case_sql() {  # case queue n
  printf 'BEGIN;\nSELECT count(*) FROM bgexec.claim(%s, %s, %s);\nROLLBACK;\n' "'ab'" "'{$2}'" "$3" >"$WORK/$1.sql"
}
case_sql run5k cr 1
case_sql full5k cf 4
case_sql over5k co 4
case_sql small cs 4
printf 'BEGIN;\nSELECT count(*) FROM bgexec.claim(%s, ARRAY(SELECT %s || g FROM generate_series(1, 500) g), 4);\nROLLBACK;\n' "'ab'" "'m'" >"$WORK/cap500.sql"
tps() { "$PGBIN/pgbench" -n "$@" -d postgres 2>/dev/null | awk '/^tps/ {print $3}'; }
run() {
  local side=$1 c
  q -f "$WORK/claim-$side.sql"
  for c in run5k full5k over5k small cap500; do
    echo "$c $side $(tps -c 1 -T 3 -f "$WORK/$c.sql" | awk '{printf "%.3f", 1000 / $1}')"
  done
}
ab_pairs run "$PAIRS"
{ claim_ab_session; cat <<'SQL'
CREATE TEMP TABLE r (k text, side text, ms float8);
DO $$
DECLARE
	o text[];
	m text[] := ARRAY(SELECT 'm' || g FROM generate_series(1, 500) g);
BEGIN
	FOR i IN 1..103 LOOP
		o := CASE WHEN i % 2 = 0 THEN '{A,B}'::text[] ELSE '{B,A}' END;
		INSERT INTO r SELECT 'run5k', x, pg_temp.t(x, '{cr}', 1) FROM unnest(o) x WHERE i > 3;
		INSERT INTO r SELECT 'full5k', x, pg_temp.t(x, '{cf}', 4) FROM unnest(o) x WHERE i > 3;
		INSERT INTO r SELECT 'over5k', x, pg_temp.t(x, '{co}', 4) FROM unnest(o) x WHERE i > 3;
		INSERT INTO r SELECT 'small', x, pg_temp.t(x, '{cs}', 4) FROM unnest(o) x WHERE i > 3;
		INSERT INTO r SELECT 'cap500', x, pg_temp.t(x, m, 4) FROM unnest(o) x WHERE i > 3;
	END LOOP;
END $$;
SQL
claim_ab_summary; } | q

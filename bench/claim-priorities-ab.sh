#!/usr/bin/env bash
# bench/claim-priorities-ab.sh OLD_REV [PAIRS]: A/B of claim() over a queue
# whose queued jobs have many distinct priorities, most of them only on
# future jobs (review F5, bench/README.md, the fifty-seventh round), and of
# the ordinary cases around it: the claim function of OLD_REV's
# sql/bgexec--0.1.0.sql (A) against the working tree's (B), swapped by
# CREATE OR REPLACE in one throwaway cluster (the installed extension, with
# B's bgexec._next_due, PGBIN), runs interleaved A B, B A, ... PAIRS times
# (default 3).  Each run, one line per case:
#   f5      ms a claim(…, 4) of a queue with 20 000 jobs due tomorrow, each
#           at its own priority (1-20000), and 200 due at priority 0 (takes
#           four; pgbench -c 1 -T 3, each claim rolled back)
#   f5cap   the same on a queue with max_running 1 000
#   f5none  ms a claim(…, 4) of 20 000 such jobs and none due (takes none)
#   f5big   ms a claim(…, 4) of 20 000 such jobs and 5 000 due at priority 0
#   far     ms a claim(…, 4) of a queue with twelve future-only priorities
#           (100-111), 200 000 jobs due tomorrow at priority 0 and one due
#           at -1: a large future backlog past the eighth priority
#   plain   ms a claim(…, 4) of a queue of 10 000 due jobs at priority 0
#   few10   ms a claim(…, 64) of 10 priorities x 20 due jobs (passes four)
#   few12   ms a claim(…, 64) of 12 priorities x 5 due jobs (passes all
#           twelve: B steps past the eighth)
#   drain   jobs/s of bench/claim-finish.sql (-c 2 -j 2 -T 5, batches of
#           64) on a queue refilled with 40 000 jobs before the run
# Output: "case side value" lines, then the medians; then the claims in
# one session with A (as bgexec.claim_a) and B called alternately, each
# rolled back in a subtransaction (p50 and mean ms a call; 20 each of the
# F5 cases, 100 of the others).
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 PAIRS=${2:-3} PORT=${PORT:-5432}
source scripts/lib/cluster.sh
source bench/lib.sh
claim_ab_start claim-priorities "$OLD" "$PORT"
q <<'SQL'
CREATE EXTENSION bgexec;
SELECT (bgexec.configure_queue('f5c', max_running => 1000)).name;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after)
SELECT q, 'noop', current_user, p, now() + interval '1 day'
  FROM generate_series(1, 20000) p, unnest('{f5,f5c,f5n,f5b}'::text[]) q;
INSERT INTO bgexec.job (queue, kind, owner, priority)
SELECT q, 'noop', current_user, 0 FROM generate_series(1, 200), unnest('{f5,f5c}'::text[]) q;
INSERT INTO bgexec.job (queue, kind, owner, priority)
SELECT 'f5b', 'noop', current_user, 0 FROM generate_series(1, 5000);
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after)
SELECT 'far', 'noop', current_user, p, now() + interval '1 day' FROM generate_series(100, 111) p;
INSERT INTO bgexec.job (queue, kind, owner, priority, run_after)
SELECT 'far', 'noop', current_user, 0, now() + interval '1 day' + i * interval '1 ms' FROM generate_series(1, 200000) i;
INSERT INTO bgexec.job (queue, kind, owner, priority) VALUES ('far', 'noop', current_user, -1);
INSERT INTO bgexec.job (queue, kind, owner) SELECT 'pl', 'noop', current_user FROM generate_series(1, 10000);
INSERT INTO bgexec.job (queue, kind, owner, priority)
SELECT 'fw10', 'noop', current_user, p FROM generate_series(1, 10) p, generate_series(1, 20);
INSERT INTO bgexec.job (queue, kind, owner, priority)
SELECT 'fw12', 'noop', current_user, p FROM generate_series(1, 12) p, generate_series(1, 5);
SQL
case_sql() {  # case queue n
  printf 'BEGIN;\nSELECT count(*) FROM bgexec.claim(%s, %s, %s);\nROLLBACK;\n' "'ab'" "'{$2}'" "$3" >"$WORK/$1.sql"
}
case_sql f5 f5 4
case_sql f5cap f5c 4
case_sql f5none f5n 4
case_sql f5big f5b 4
case_sql far far 4
case_sql plain pl 4
case_sql few10 fw10 64
case_sql few12 fw12 64
tps() { "$PGBIN/pgbench" -n "$@" -d postgres 2>/dev/null | awk '/^tps/ {print $3}'; }
run() {
  local side=$1 c
  q -f "$WORK/claim-$side.sql"
  q -c "DELETE FROM bgexec.job WHERE queue = 'pq'" -c "VACUUM ANALYZE bgexec.job" \
    -c "INSERT INTO bgexec.job (queue, kind, owner) SELECT 'pq', 'noop', current_user FROM generate_series(1, 40000)" \
    -c "VACUUM ANALYZE bgexec.job"
  for c in f5 f5cap f5none f5big far plain few10 few12; do
    echo "$c $side $(tps -c 1 -T 3 -f "$WORK/$c.sql" | awk '{printf "%.3f", 1000 / $1}')"
  done
  echo "drain $side $(tps -c 2 -j 2 -T 5 -f bench/claim-finish.sql | awk '{printf "%.0f", $1 * 64}')"
}
ab_pairs run "$PAIRS"
{ claim_ab_session; cat <<'SQL'
CREATE TEMP TABLE r (k text, side text, ms float8);
DO $$
DECLARE
	o text[];
BEGIN
	FOR i IN 1..103 LOOP
		o := CASE WHEN i % 2 = 0 THEN '{A,B}'::text[] ELSE '{B,A}' END;
		INSERT INTO r SELECT 'f5', x, pg_temp.t(x, '{f5}', 4) FROM unnest(o) x WHERE i > 3 AND i <= 23;
		INSERT INTO r SELECT 'f5big', x, pg_temp.t(x, '{f5b}', 4) FROM unnest(o) x WHERE i > 3 AND i <= 23;
		INSERT INTO r SELECT 'far', x, pg_temp.t(x, '{far}', 4) FROM unnest(o) x WHERE i > 3 AND i <= 23;
		INSERT INTO r SELECT 'plain', x, pg_temp.t(x, '{pl}', 4) FROM unnest(o) x WHERE i > 3;
		INSERT INTO r SELECT 'few10', x, pg_temp.t(x, '{fw10}', 64) FROM unnest(o) x WHERE i > 3;
		INSERT INTO r SELECT 'few12', x, pg_temp.t(x, '{fw12}', 64) FROM unnest(o) x WHERE i > 3;
	END LOOP;
END $$;
SQL
claim_ab_summary; } | q

#!/usr/bin/env bash
# bench/savepoints.sh: the cost of submits made each under its own
# subtransaction (an ORM's nested transaction, a PL/pgSQL block with
# EXCEPTION), against the same submits without one and against plain
# INSERTs each under its own subtransaction.
#
# Each round and each N: three DO blocks in one session, each timed
# (psql's \timing): N submits to three queues in one transaction; the same N
# each in a BEGIN ... EXCEPTION block; N one-row INSERTs into a plain table
# each in such a block.  The jobs are deleted between rounds.
#
# Usage: bench/savepoints.sh   (database from the libpq PG* variables)
# SAVEPOINT_JOBS (default "5000 20000 40000"), SAVEPOINT_ROUNDS (default 2).
# Deletes every job of the database.
set -euo pipefail
ns=${SAVEPOINT_JOBS:-5000 20000 40000}
rounds=${SAVEPOINT_ROUNDS:-2}
psql -qX -v ON_ERROR_STOP=1 -c "CREATE TABLE IF NOT EXISTS bench_savepoints (i int, q text)" >/dev/null
ms() { sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tr '\n' ' '; }
printf '%-6s %-6s %14s %14s %14s\n' round N "submits ms" "each in sub ms" "inserts in sub"
for r in $(seq 1 "$rounds"); do
  for n in $ns; do
    t=$(psql -qX -v ON_ERROR_STOP=1 <<SQL | ms
DELETE FROM bgexec.job;
TRUNCATE bench_savepoints;
\timing on
DO \$\$ BEGIN FOR i IN 1..$n LOOP PERFORM bgexec.submit('k', queue => 'q' || (i % 3)); END LOOP; END \$\$;
DO \$\$ BEGIN FOR i IN 1..$n LOOP
  BEGIN PERFORM bgexec.submit('k', queue => 'q' || (i % 3)); EXCEPTION WHEN OTHERS THEN RAISE; END;
END LOOP; END \$\$;
DO \$\$ BEGIN FOR i IN 1..$n LOOP
  BEGIN INSERT INTO bench_savepoints VALUES (i, 'q' || (i % 3)); EXCEPTION WHEN OTHERS THEN RAISE; END;
END LOOP; END \$\$;
SQL
)
    read -r a b c <<<"$t"
    printf '%-6s %-6s %14s %14s %14s\n' "$r" "$n" "$a" "$b" "$c"
  done
done
psql -qX -c "DROP TABLE bench_savepoints; DELETE FROM bgexec.job" >/dev/null

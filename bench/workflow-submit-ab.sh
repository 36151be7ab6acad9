#!/usr/bin/env bash
# Interleaved A/B of workflow submit validation (extension/validate.c):
# two databases with bgexec installed, one per build (clusters of the same
# settings: bgexec is preloaded, so one cluster cannot hold both), a fresh
# session per trial; N submits of a 200-step workflow (a chain of run
# steps, each with needs, a template and a timeout) in a rolled-back
# transaction.  usage: OLD_DB=conninfo NEW_DB=conninfo [PAIRS=6] [N=1000]
#   bench/workflow-submit-ab.sh
set -euo pipefail
: "${OLD_DB:?conninfo of the database with the old build}" "${NEW_DB:?conninfo of the new}"
PAIRS=${PAIRS:-6} N=${N:-1000}
P=$(python3 -c '
import json
steps = [{"id": "s0", "run": ["echo", "{{input.x}}"]}]
for i in range(1, 200):
    steps.append({"id": f"s{i}", "needs": [f"s{i-1}"], "run": ["echo", "{{steps.s%d.output}}" % (i - 1)], "timeout": 5})
print(json.dumps({"input": {"x": 1}, "steps": steps}))')
trial() {
  psql -qXAt "$1" -v p="$P" <<SQL | tail -1
BEGIN;
CREATE TEMP TABLE pl AS SELECT :'p'::jsonb AS p;
SELECT bgexec.submit('workflow', (SELECT p FROM pl)) > 0;  -- warm
SELECT set_config('ab.t0', clock_timestamp()::text, true);
DO \$\$ DECLARE x jsonb := (SELECT p FROM pl); BEGIN FOR i IN 1..$N LOOP PERFORM bgexec.submit('workflow', x); END LOOP; END \$\$;
SELECT round(extract(epoch FROM clock_timestamp() - current_setting('ab.t0')::timestamptz) * 1000 / $N, 3);
ROLLBACK;
SQL
}
for ((i = 1; i <= PAIRS; i++)); do
  echo "pair $i: old $(trial "$OLD_DB") ms/submit  new $(trial "$NEW_DB") ms/submit"
done

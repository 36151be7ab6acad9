# bench/lib.sh: what the bench/*.sh scripts share (sourced).

# MEDIAN_AWK: the start of an awk program that reads "name value" lines
# into v[name, 1..n[name]] and defines median(name); the caller appends its
# END block.
MEDIAN_AWK='
  { v[$1, ++n[$1]] = $2 }
  function median(name,   k, i, j, t, a) {
    k = n[name]; for (i = 1; i <= k; i++) a[i] = v[name, i]
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }'

# tenant_cluster: a throwaway cluster in $WORK/cluster (a Unix socket only;
# synchronous_commit off, so that commit flushes, which both sides of an
# A/B pay alike, do not drown a gateway's own cost) with the installed
# extension, a role tenant_a of bgexec_client, and $WORK/tokens.json giving
# it the token "token-a" (bench/gateway-ab.sh, bench/sse-crowd-ab.sh,
# bench/sse-burst-ab.sh).
tenant_cluster() {
  cluster_start "$WORK/cluster" 5432 "synchronous_commit = off"
  psql -X -q -v ON_ERROR_STOP=1 -d postgres <<'SQL'
CREATE EXTENSION bgexec;
CREATE ROLE tenant_a;
GRANT bgexec_client TO tenant_a;
SQL
  echo '{"token-a": "tenant_a"}' >"$WORK/tokens.json"
}

# gateway_scratch NAME: WORK, a fresh directory under TMPDIR (or /tmp), and
# at exit the gateway in $gw_pid (when set), the cluster in $WORK/cluster
# and WORK go (bench/sse-crowd-ab.sh, bench/sse-idle-ab.sh,
# bench/sse-burst-ab.sh).
gateway_scratch() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/bgexec-$1.XXXXXX")
  gw_pid=
  trap gateway_scratch_cleanup EXIT
}
# gateway_start BIN NAME PORT [ARGS...]: `BIN serve` on 127.0.0.1:PORT with
# $WORK/tokens.json and ARGS, its log $WORK/serve-NAME.log, its pid in
# gw_pid (gateway_scratch stops it); returns once /metrics answers (10 s
# at most).
gateway_start() {
  local bin=$1 name=$2 port=$3
  shift 3
  "$bin" serve --listen "127.0.0.1:$port" --tokens "$WORK/tokens.json" "$@" >"$WORK/serve-$name.log" 2>&1 &
  gw_pid=$!
  for _ in $(seq 1 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/metrics" && break
    sleep 0.1
  done
}
gateway_scratch_cleanup() {
  [[ -n $gw_pid ]] && kill "$gw_pid" 2>/dev/null || true
  cluster_stop "$WORK/cluster"
  rm -rf "$WORK"
}

# The claim A/B scripts (bench/claim-heads-ab.sh, bench/claim-running-ab.sh):
# claim_ab_files OLD_REV writes $WORK/claim-A.sql (OLD_REV's claim
# function) and $WORK/claim-B.sql (the working tree's), each a CREATE OR
# REPLACE.
claim_of() {
  awk '/^CREATE FUNCTION bgexec.claim\(/{p=1} p{print} p && /^\$\$;$/{exit}' |
    sed '1s/^CREATE FUNCTION/CREATE OR REPLACE FUNCTION/'
}
claim_ab_files() {
  git show "$1:sql/bgexec--0.1.0.sql" >"$WORK/old.sql"  # (not piped: awk exits early)
  claim_of <"$WORK/old.sql" >"$WORK/claim-A.sql"
  claim_of <sql/bgexec--0.1.0.sql >"$WORK/claim-B.sql"
}
# claim_ab_start NAME OLD_REV PORT [postgresql.conf lines...]: $WORK (a
# temporary directory, removed at exit with the cluster: claim_ab_cleanup),
# claim_ab_files OLD_REV, a throwaway cluster in $WORK/cluster with the
# claim A/B scripts' settings and the lines given, and q: psql on it.
claim_ab_start() {
  local name=$1 old=$2 port=$3
  shift 3
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/bgexec-$name.XXXXXX")
  trap claim_ab_cleanup EXIT
  claim_ab_files "$old"
  cluster_start "$WORK/cluster" "$port" "fsync = off" "synchronous_commit = off" \
    "bgexec.watchdog_interval = '1h'" "shared_buffers = '256MB'" "$@"
}
claim_ab_cleanup() {
  cluster_stop "$WORK/cluster"
  rm -rf "$WORK"
}
q() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -d postgres "$@"; }
# ab_pairs RUN PAIRS: RUN A, RUN B interleaved (A B, B A, ...) PAIRS
# times, their "case side value" lines kept in $WORK/out, then the median
# of each case and side.
ab_pairs() {
  local run=$1 pairs=$2 p
  for ((p = 1; p <= pairs; p++)); do
    if ((p % 2)); then "$run" A; "$run" B; else "$run" B; "$run" A; fi
  done | tee "$WORK/out"
  awk '{print $1 "/" $2, $3}' "$WORK/out" |
    awk "$MEDIAN_AWK"' END { for (k in n) printf "median %s %s\n", k, median(k) }' | sort
}
# claim_ab_session: on stdout, the SQL that installs B as bgexec.claim and
# A as bgexec.claim_a, and pg_temp.t(side, queues, n), the ms of one claim
# by side A or B, rolled back; the caller appends its loop (one session).
claim_ab_session() {
  cat "$WORK/claim-B.sql"
  sed -e 's/^CREATE OR REPLACE FUNCTION bgexec.claim(/CREATE OR REPLACE FUNCTION bgexec.claim_a(/' \
      -e 's/\bclaim\./claim_a./g' "$WORK/claim-A.sql"
  cat <<'SQL'
CREATE FUNCTION pg_temp.t(side text, qs text[], n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t timestamptz := clock_timestamp();
BEGIN
	BEGIN
		IF side = 'A' THEN PERFORM count(*) FROM bgexec.claim_a('ab', qs, n);
		ELSE PERFORM count(*) FROM bgexec.claim('ab', qs, n); END IF;
		RAISE EXCEPTION 'rolled back';
	EXCEPTION WHEN raise_exception THEN NULL;
	END;
	RETURN extract(epoch FROM clock_timestamp() - t) * 1000;
END $$;
SQL
}
# claim_ab_summary: on stdout, the SQL that reports claim_ab_session's
# loop, its table r (k, side, ms): p50 and mean ms a call and the calls.
claim_ab_summary() {
  cat <<'SQL'
SELECT k AS loop, side, round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 3) AS p50_ms,
       round(avg(ms)::numeric, 3) AS mean_ms, count(*) AS calls
  FROM r GROUP BY 1, 2 ORDER BY 1, 2;
SQL
}

#!/usr/bin/env bash
# The daemon's own SQL runs none of a user's functions.  Its sessions keep
# the default search_path ("$user", public), and PostgreSQL resolves a
# call across every schema there, preferring an overload of the argument
# types over a polymorphic built-in (array_to_json(anyarray),
# count("any"), =(anyenum, anyenum)) or one its arguments must be cast to
# (*(float8, interval) for an int): a role that may create in public, the
# database's owner on PG 15, plants such overloads and the daemon ran them
# as whoever ran it (a superuser's `bgexec workers`; an unauthenticated
# GET /metrics as the gateway's login).  Here the database's owner, no
# superuser, plants traps for the built-ins the daemon calls, with the
# argument types it passes, and an operator trap for every pair of the
# types it handles that pg_catalog has no operator of exactly; each fired
# trap leaves a row in public.trapped and a line in the server's log.  A
# superuser then runs the CLI, a worker (jobs, a workflow with an approval,
# a failure), the gateway and a small bench: every command succeeds and
# no trap fires.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57956

psql -qX -v ON_ERROR_STOP=1 >/dev/null <<'SQL' || fail "the owner's database"
CREATE ROLE e2e_owner LOGIN;
CREATE DATABASE e2e_app OWNER e2e_owner;
SQL
export PGDATABASE=e2e_app
psql -qX -v ON_ERROR_STOP=1 >/dev/null <<'SQL' || fail "bgexec in the owner's database"
CREATE EXTENSION bgexec;
-- a client as well (the owner of an application's database often is): it
-- may name bgexec.job_status in an operator
GRANT bgexec_client TO e2e_owner;
SQL
# The test's own statements: pg_catalog alone on their path, so they run no
# trap.  PGOPTIONS for psql only: the daemon's processes keep the default.
sql() { PGOPTIONS="-c search_path=pg_catalog" psql -qXAt -c "$1"; }
[[ $(sql "SELECT has_schema_privilege('e2e_owner', 'public', 'CREATE')") == t ]] \
  || fail "the database's owner cannot create in public"

# --- the traps, planted by the database's owner
PGUSER=e2e_owner psql -qX -v ON_ERROR_STOP=1 >/dev/null 2>"$E2E_DIR/plant.err" <<'SQL' \
  || fail "planting the traps: $(cat "$E2E_DIR/plant.err")"
CREATE TABLE public.trapped (who name NOT NULL, trap text NOT NULL);
GRANT SELECT, INSERT ON public.trapped TO PUBLIC;
-- A row if the caller's transaction commits, a log line whether or not.
CREATE FUNCTION public.trap_fired(trap text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.trapped VALUES (current_user, trap);
  RAISE LOG 'e2e trap fired: % as %', trap, current_user;
END $$;

-- Functions the daemon called with these types, each returning what the
-- built-in would.  bgexec workers and GET /v1/workers:
CREATE FUNCTION public.array_to_json(a text[]) RETURNS json LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trap_fired('array_to_json(text[])'); RETURN pg_catalog.array_to_json(a); END $$;
-- GET /metrics' histogram buckets
CREATE FUNCTION public.unnest(a float8[]) RETURNS SETOF float8 LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trap_fired('unnest(float8[])'); RETURN QUERY SELECT pg_catalog.unnest(a); END $$;
-- bench: its history's started events, its table sizes
CREATE FUNCTION public.jsonb_build_object(k1 text, v1 int, k2 text, v2 text, k3 text, v3 int)
  RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  PERFORM public.trap_fired('jsonb_build_object(text,int,text,text,text,int)');
  RETURN pg_catalog.jsonb_build_object(k1, v1, k2, v2, k3, v3);
END $$;
CREATE FUNCTION public.pg_total_relation_size(r text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  PERFORM public.trap_fired('pg_total_relation_size(text)');
  RETURN pg_catalog.pg_total_relation_size(r::pg_catalog.regclass);
END $$;

-- Aggregates, each firing from its final function: once per group even
-- over no rows.  GET /metrics' count of durations:
CREATE FUNCTION public.trap_count_step(n bigint, v float8) RETURNS bigint
  LANGUAGE sql STRICT AS 'SELECT n OPERATOR(pg_catalog.+) 1';
CREATE FUNCTION public.trap_count_final(n bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trap_fired('count(float8)'); RETURN n; END $$;
CREATE AGGREGATE public.count(float8) (SFUNC = public.trap_count_step, STYPE = bigint, INITCOND = '0',
                                       FINALFUNC = public.trap_count_final);
-- GET /v1/jobs' "is there a next job" (an aggregate is a window function too)
CREATE FUNCTION public.trap_lead_step(s bigint, v bigint) RETURNS bigint LANGUAGE sql AS 'SELECT v';
CREATE FUNCTION public.trap_lead_final(s bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trap_fired('lead(bigint)'); RETURN NULL; END $$;
CREATE AGGREGATE public.lead(bigint) (SFUNC = public.trap_lead_step, STYPE = bigint,
                                      FINALFUNC = public.trap_lead_final);
-- bench: pickup percentiles (ARRAY[0.5, ...] is numeric[], the ms numeric)
CREATE FUNCTION public.trap_pct_step(s numeric[], v numeric) RETURNS numeric[] LANGUAGE sql AS 'SELECT s';
CREATE FUNCTION public.trap_pct_final(s numeric[], p numeric[]) RETURNS float8[] LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trap_fired('percentile_cont(numeric[] ORDER BY numeric)'); RETURN '{0,0,0}'; END $$;
CREATE AGGREGATE public.percentile_cont(numeric[] ORDER BY numeric) (
  SFUNC = public.trap_pct_step, STYPE = numeric[], FINALFUNC = public.trap_pct_final);

-- Built-ins the daemon leaves unqualified, as their argument types are
-- exactly pg_catalog's: PostgreSQL searches pg_catalog first, so these
-- are never found (and EXTRACT and AT TIME ZONE name pg_catalog's).
DO $do$
DECLARE
  f regprocedure;
BEGIN
  FOREACH f IN ARRAY ARRAY['now()', 'clock_timestamp()', 'isfinite(timestamptz)', 'octet_length(text)',
      'current_database()', 'generate_series(int, int)', 'pg_current_wal_lsn()',
      'pg_wal_lsn_diff(pg_lsn, pg_lsn)', 'pg_stat_clear_snapshot()', 'extract(text, interval)',
      'extract(text, timestamptz)', 'timezone(text, timestamptz)']::regprocedure[] LOOP
    EXECUTE (SELECT pg_catalog.format(
      $f$CREATE FUNCTION public.%I(%s) RETURNS %s%s LANGUAGE plpgsql AS $b$
         BEGIN PERFORM public.trap_fired(%L); %s pg_catalog.%I(%s); END $b$$f$,
      p.proname, pg_catalog.pg_get_function_arguments(p.oid), CASE WHEN p.proretset THEN 'SETOF ' ELSE '' END,
      p.prorettype::regtype, f::text,
      CASE WHEN p.proretset THEN 'RETURN QUERY SELECT'
           WHEN p.prorettype OPERATOR(pg_catalog.=) 'void'::regtype THEN 'PERFORM' ELSE 'RETURN' END, p.proname,
      (SELECT pg_catalog.string_agg(pg_catalog.format('$%s', i), ', ')
         FROM pg_catalog.generate_series(1, p.pronargs) i))
      FROM pg_catalog.pg_proc p WHERE p.oid = f);
  END LOOP;
END $do$;
CREATE FUNCTION public.trap_agg_final(v anyelement) RETURNS anyelement LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trap_fired('an exact aggregate'); RETURN v; END $$;
CREATE FUNCTION public.trap_agg_step(s anyelement, v anyelement) RETURNS anyelement LANGUAGE sql AS 'SELECT v';
CREATE AGGREGATE public.sum(int) (SFUNC = public.trap_agg_step, STYPE = int, FINALFUNC = public.trap_agg_final);
CREATE AGGREGATE public.sum(bigint) (SFUNC = public.trap_agg_step, STYPE = bigint, FINALFUNC = public.trap_agg_final);
CREATE AGGREGATE public.sum(float8) (SFUNC = public.trap_agg_step, STYPE = float8, FINALFUNC = public.trap_agg_final);
CREATE AGGREGATE public.max(bigint) (SFUNC = public.trap_agg_step, STYPE = bigint, FINALFUNC = public.trap_agg_final);
CREATE AGGREGATE public.max(numeric) (SFUNC = public.trap_agg_step, STYPE = numeric, FINALFUNC = public.trap_agg_final);
CREATE AGGREGATE public.min(numeric) (SFUNC = public.trap_agg_step, STYPE = numeric, FINALFUNC = public.trap_agg_final);
CREATE AGGREGATE public.max(timestamptz) (SFUNC = public.trap_agg_step, STYPE = timestamptz,
                                          FINALFUNC = public.trap_agg_final);
CREATE AGGREGATE public.min(timestamptz) (SFUNC = public.trap_agg_step, STYPE = timestamptz,
                                          FINALFUNC = public.trap_agg_final);
CREATE FUNCTION public.trap_star_step(n bigint) RETURNS bigint LANGUAGE sql AS 'SELECT n OPERATOR(pg_catalog.+) 1';
CREATE FUNCTION public.trap_star_final(n bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trap_fired('count(*)'); RETURN n; END $$;
CREATE AGGREGATE public.count(*) (SFUNC = public.trap_star_step, STYPE = bigint, INITCOND = '0',
                                  FINALFUNC = public.trap_star_final);

-- Operators: for each pair of these types that pg_catalog has no operator
-- of exactly, one that pg_catalog's would be taken for through a cast or a
-- polymorphic type (status = 'queued' is =(anyenum, anyenum), an int
-- times an interval *(float8, interval)), computing what pg_catalog's
-- does.  And T op T where pg_catalog has only T op <another type>: an
-- untyped literal on one side is taken for the other side's type first
-- (error->>'reason' would be ->>(jsonb, jsonb), then fails parsing
-- 'reason' as JSON); those return NULL.
DO $do$
DECLARE
  ops text[] := ARRAY['=', '<>', '<', '<=', '>', '>=', '+', '-', '*', '/', '%', '~', '!~', '~~', '!~~', '~~*',
                      '->', '->>', '#>', '#>>', '?', '@>', '<@', '&&', '||'];
  types regtype[] := ARRAY['boolean', 'smallint', 'integer', 'bigint', 'numeric', 'real', 'double precision',
                           'text', 'name', 'json', 'jsonb', 'timestamptz', 'timestamp', 'interval', 'pg_lsn',
                           'bgexec.job_status', 'text[]', 'integer[]', 'bigint[]', 'double precision[]',
                           'numeric[]', 'bgexec.job_status[]']::regtype[];
  op text; l regtype; r regtype; rt regtype; n int := 0; computed boolean;
BEGIN
  FOREACH op IN ARRAY ops LOOP
    FOREACH l IN ARRAY types LOOP
      FOREACH r IN ARRAY types LOOP
        -- one of exactly these types in pg_catalog: it is found first
        CONTINUE WHEN EXISTS (SELECT FROM pg_catalog.pg_operator o
                               WHERE o.oprname OPERATOR(pg_catalog.=) op
                                 AND o.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace
                                 AND o.oprleft OPERATOR(pg_catalog.=) l AND o.oprright OPERATOR(pg_catalog.=) r);
        computed := true;
        BEGIN
          EXECUTE pg_catalog.format('SELECT pg_catalog.pg_typeof(NULL::%s OPERATOR(pg_catalog.%s) NULL::%s)',
                                    l, op, r) INTO rt;
        EXCEPTION WHEN undefined_function OR ambiguous_function OR datatype_mismatch THEN
          computed := false;
          SELECT o.oprresult INTO rt FROM pg_catalog.pg_operator o
           WHERE o.oprname OPERATOR(pg_catalog.=) op
             AND o.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace
             AND (o.oprleft OPERATOR(pg_catalog.=) l OR o.oprright OPERATOR(pg_catalog.=) l)
           ORDER BY o.oid LIMIT 1;
          CONTINUE WHEN l OPERATOR(pg_catalog.<>) r OR rt IS NULL;
        END;
        n := n OPERATOR(pg_catalog.+) 1;
        EXECUTE pg_catalog.format(
          $f$CREATE FUNCTION public.%I(a %s, b %s) RETURNS %s LANGUAGE plpgsql AS $b$
             BEGIN PERFORM public.trap_fired(%L); RETURN %s; END $b$$f$,
          'trap_op_' OPERATOR(pg_catalog.||) n, l, r, rt, pg_catalog.format('%s(%s,%s)', op, l, r),
          CASE WHEN computed THEN pg_catalog.format('a OPERATOR(pg_catalog.%s) b', op) ELSE 'NULL' END);
        EXECUTE pg_catalog.format('CREATE OPERATOR public.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = public.%I)',
                                  op, l, r, 'trap_op_' OPERATOR(pg_catalog.||) n);
      END LOOP;
    END LOOP;
  END LOOP;
END $do$;
SQL
echo "$(sql "SELECT count(*) FROM pg_operator WHERE oprnamespace = 'public'::regnamespace") operator traps" \
  >"$E2E_DIR/traps.txt"
# among them those the daemon's statements were taken for
for op in '=(bgexec.job_status,bgexec.job_status)' '->>(jsonb,jsonb)' '->(jsonb,jsonb)' '*(numeric,integer)' \
  '*(integer,interval)'; do
  [[ $(sql "SELECT to_regoperator('public.$op') IS NOT NULL") == t ]] || fail "no operator trap $op"
done

# The traps work: unqualified calls in a default session find them.
psql -qXAt -v ON_ERROR_STOP=1 >/dev/null 2>"$E2E_DIR/self.err" <<'SQL' \
  || fail "the traps' own check: $(cat "$E2E_DIR/self.err")"
SELECT array_to_json('{a}'::text[]);
SELECT count(x) FROM (VALUES (1.5::float8)) v(x);
SELECT 'queued'::bgexec.job_status = 'queued';
SELECT 2 * interval '1 s';
SQL
fired=$(sql "SELECT string_agg(trap || ' as ' || who, ', ' ORDER BY trap) FROM public.trapped")
[[ $fired == "*(integer,interval) as postgres, =(bgexec.job_status,bgexec.job_status) as postgres, \
array_to_json(text[]) as postgres, count(float8) as postgres" ]] || fail "the traps did not fire when called: $fired"
grep -q 'e2e trap fired: array_to_json(text\[\]) as postgres' "$E2E_DIR/pg/postgres.log" \
  || fail "a fired trap wrote no log line"
sql "DELETE FROM public.trapped" >/dev/null
log_from=$(($(stat -c %s "$E2E_DIR/pg/postgres.log") + 1))

# --- what the daemon does, as a superuser.  Every failure is collected
# (all of them say more than the first), and reported at the end.
problems=()
# try WHAT CMD...: CMD succeeds (its stdout in $out)
try() {
  local what=$1 rc; shift
  set +e; out=$("$@" 2>"$E2E_DIR/try.err"); rc=$?; set -e
  ((rc == 0)) || problems+=("$what: exit $rc: $(tail -c 600 "$E2E_DIR/try.err")")
}
# try_is WHAT EXPECTED CMD...: CMD succeeds and prints EXPECTED
try_is() {
  local what=$1 want=$2; shift 2
  try "$what" "$@"
  [[ $out == "$want" ]] || problems+=("$what: printed $out, expected $want")
}

start_worker w1 --allow-run --queue default --queue other --concurrency 4
try_is "submit noop --wait" "1 completed" "$BGEXEC" submit noop --wait
try_is "a workflow" "2 completed" "$BGEXEC" submit workflow '{"steps": [
  {"id": "a", "run": ["sh", "-c", "echo 7"]},
  {"id": "b", "needs": ["a"], "sql": "SELECT $1::int AS n", "params": ["{{steps.a.stdout}}"]},
  {"id": "c", "needs": ["b"], "sleep": 0.2}]}' --wait
set +e; out=$("$BGEXEC" submit workflow '{"steps": [{"id": "f", "run": ["false"]}]}' --queue other --wait 2>&1)
rc=$?; set -e
((rc == 1)) || problems+=("a failing workflow: exit $rc: $out")
approval=$("$BGEXEC" submit workflow '{"steps": [{"id": "g", "approval": {}},
                                                 {"id": "h", "needs": ["g"], "run": ["true"]}]}')
wait_for 20 status_is "$approval" suspended || problems+=("the approval job is $(job_status "$approval")")
try "resume" "$BGEXEC" resume "$approval" '{"who": "ann"}'
wait_for 20 status_is "$approval" completed || problems+=("the resumed job is $(job_status "$approval")")
try "tail" "$BGEXEC" tail 2
try "tail --json" "$BGEXEC" tail 2 --json --from 1
try "status" "$BGEXEC" status 2

# a queue no worker claims from: status notes it, jobs filter by status
held=$("$BGEXEC" submit noop --queue nobody)
try "status of a queued job" "$BGEXEC" status "$held"
try "jobs" "$BGEXEC" jobs
try "jobs --json" "$BGEXEC" jobs --json
try_is "jobs --status completed" "4 2 1 " \
  sh -c "\"$BGEXEC\" jobs --status completed | tail -n +2 | cut -f1 | tr '\n' ' '"
try_is "jobs --queue --kind --status" "$held " \
  sh -c "\"$BGEXEC\" jobs --queue nobody --kind noop --status queued | tail -n +2 | cut -f1 | tr '\n' ' '"
try "stop ID" "$BGEXEC" stop "$held"
try "retry ID" "$BGEXEC" retry "$held"
try_is "stop --queue" "cancelled: 1, stop requested: 0 (running), of 1 matching jobs" "$BGEXEC" stop --queue nobody
try_is "retry --status" "queued again: 1 of 1 matching jobs" "$BGEXEC" retry --queue nobody --status cancelled
try "queues" "$BGEXEC" queues
try "pause-queue" "$BGEXEC" pause-queue nobody
try "resume-queue" "$BGEXEC" resume-queue nobody
try "configure-queue" "$BGEXEC" configure-queue nobody --max-queued 100
try "workers" "$BGEXEC" workers
grep -q '^w1' <<<"$out" || problems+=("bgexec workers does not list w1: $out")
try "workers --all" "$BGEXEC" workers --all
try "workers --json" "$BGEXEC" workers --json
try "schedule" "$BGEXEC" schedule nightly '0 3 * * *' noop
try "schedules" "$BGEXEC" schedules
try "pause-schedule" "$BGEXEC" pause-schedule nightly
try "resume-schedule" "$BGEXEC" resume-schedule nightly
try "run-schedule" "$BGEXEC" run-schedule nightly --wait
try "unschedule" "$BGEXEC" unschedule nightly

# --- the gateway: a token for the superuser; /metrics needs none
start_gateway
# http METHOD PATH STATUS [BODY]: the answer has STATUS (its body in $E2E_DIR/http.out)
http() {
  local code auth=(-H "Authorization: Bearer t")
  [[ $2 == /metrics ]] && auth=()
  code=$(curl -sN --max-time 20 -o "$E2E_DIR/http.out" -w '%{http_code}' -X "$1" "${auth[@]}" \
    ${4:+-H "Content-Type: application/json" --data "$4"} "$url$2") || true
  [[ $code == "$3" ]] || problems+=("$1 $2: $code, expected $3: $(head -c 300 "$E2E_DIR/http.out" 2>/dev/null || true)")
}
http GET /metrics 200
http GET /v1/workers 200
http GET "/v1/workers?all=true" 200
http GET /v1/jobs 200
http GET "/v1/jobs?status=completed&limit=2" 200
http GET "/v1/jobs?queue=nobody&status=queued" 200
http GET /v1/jobs/2 200
http GET /v1/jobs/2/events 200
grep -q '^event: completed$' "$E2E_DIR/http.out" \
  || problems+=("job 2's events: $(head -c 300 "$E2E_DIR/http.out" 2>/dev/null || true)")
http GET /v1/queues 200
http POST /v1/queues/nobody/pause 200
http POST /v1/queues/nobody/resume 200
http POST /v1/jobs 201 '{"kind": "noop", "queue": "nobody", "payload": {"x": 1}, "timeout": 2.5}'
http POST /v1/jobs 201 '{"kind": "noop", "queue": "nobody", "idempotency_key": "k1"}'
http POST /v1/jobs 200 '{"kind": "noop", "queue": "nobody", "idempotency_key": "k1"}'
http POST "/v1/jobs/$held/stop" 200
http POST "/v1/jobs/$held/retry" 200
http POST /v1/jobs/stop 200 '{"queue": "nobody"}'
http POST /v1/jobs/retry 200 '{"queue": "nobody", "status": "cancelled"}'
http PUT /v1/schedules/hourly 200 '{"cron": "0 * * * *", "kind": "noop", "payload": {"a": 1}, "timeout": 30}'
http GET /v1/schedules 200
http GET /v1/schedules/hourly 200
http POST /v1/schedules/hourly/pause 200
http POST /v1/schedules/hourly/resume 200
http POST /v1/schedules/hourly/run 201
http DELETE /v1/schedules/hourly 200
gated=$("$BGEXEC" submit workflow '{"steps": [{"id": "g", "approval": {}}]}')
wait_for 20 status_is "$gated" suspended || problems+=("the second approval job is $(job_status "$gated")")
http POST "/v1/jobs/$gated/resume" 200 '{"who": "bob"}'
wait_for 20 status_is "$gated" completed || problems+=("the job resumed through the gateway is $(job_status "$gated")")

# --- a small bench (its own workers, its history and percentiles)
try "bench" "$BGEXEC" bench --jobs 40 --rounds 1 --workers 1 --concurrency 2 --pickup-jobs 4 --pickup-gap-ms 2 \
  --skip-reference --skip-rss --scaling --scaling-jobs 20 --scaling-workers 1 --history 20 --backlog 10 \
  --claim-iterations 5
# the durations of jobs finished since the gateway started, counted once
# they are older than its 5 s commit margin
counted() {
  [[ $(curl -s --max-time 20 -o "$E2E_DIR/http.out" -w '%{http_code}' "$url/metrics") == 200 ]] \
    && grep -q '^bgexec_job_duration_seconds_count [1-9]' "$E2E_DIR/http.out"
}
wait_for 20 counted \
  || problems+=("GET /metrics counted no finished job: $(head -c 300 "$E2E_DIR/http.out" 2>/dev/null || true)")

stop_pids "$PID_w1"
fired=$(sql "SELECT string_agg(DISTINCT trap || ' as ' || who, ', ') FROM public.trapped")
[[ -z $fired ]] || problems+=("traps fired: $fired")
logged=$(tail -c "+$log_from" "$E2E_DIR/pg/postgres.log" | grep -o 'e2e trap fired: .*' | sort -u | tr '\n' ';' || true)
[[ -z $logged ]] || problems+=("traps logged: $logged")
if ((${#problems[@]})); then
  printf '  %s\n' "${problems[@]}" >"$E2E_DIR/problems.txt"
  fail "$(cat "$E2E_DIR/traps.txt"); ${#problems[@]} problems:
$(cat "$E2E_DIR/problems.txt")"
fi
ok "$(cat "$E2E_DIR/traps.txt"), none fired"

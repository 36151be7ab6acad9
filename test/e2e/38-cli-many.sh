#!/usr/bin/env bash
# bgexec stop and retry of many (--queue, --kind, --status): every matching
# job of the caller's, oldest first, at most --limit, in transactions of 500.
# A real worker's running jobs are asked to stop and end cancelled; queued
# ones are cancelled at once; a retry puts failed and timed-out ones (and
# cancelled ones when asked) back in the queue.  A tenant acts on its own
# jobs only.  A full queue stops a retry at the batch that overflows it:
# exit 3, the batches before it kept and counted.  Bad filters are usage
# errors and change nothing.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57992
start_worker w1 --allow-run --queue run --concurrency 4

sleeper='{"steps": [{"id": "s", "run": ["sleep", "60"]}]}'
run_ids=$(for i in 1 2 3; do "$BGEXEC" submit workflow "$sleeper" --queue run; done) || fail "submit to run"
held_ids=$(for i in 1 2 3 4 5; do "$BGEXEC" submit noop --queue held; done) || fail "submit to held"
other=$("$BGEXEC" submit other --queue held) || fail "submit of another kind"
running() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = 'run' AND status = 'running'") == 3 ]]; }
wait_for 20 running || fail "the sleepers did not start: $(sql "SELECT id, status FROM bgexec.job")"

# --kind and --limit: the two oldest noop jobs of held, nothing else
out=$("$BGEXEC" stop --queue held --kind noop --limit 2) || fail "stop of many: exit $?"
[[ $out == "cancelled: 2, stop requested: 0 (running), of 2 matching jobs" ]] || fail "stop of many printed: $out"
[[ $(sql "SELECT string_agg(id::text, ' ' ORDER BY id) FROM bgexec.job WHERE status = 'cancelled'") == \
   "$(head -2 <<<"$held_ids" | tr '\n' ' ' | sed 's/ $//')" ]] \
  || fail "stop --limit 2 cancelled: $(sql "SELECT id, queue, kind, status FROM bgexec.job ORDER BY id")"
# jobs --kind lists that kind only
out=$("$BGEXEC" jobs --kind other) || fail "jobs --kind: exit $?"
[[ $(tail -n +2 <<<"$out" | cut -f1) == "$other" ]] || fail "jobs --kind other: $out"

# the running jobs: stop requested, and the worker ends them cancelled
out=$("$BGEXEC" stop --queue run --json) || fail "stop of running jobs: exit $?"
[[ $out == '{"cancelled":0,"matched":3,"stop_requested":3}' ]] || fail "stop of running jobs printed: $out"
for id in $run_ids; do wait_status "$id" cancelled 20; done

# retry: failed and timed_out by default (none here), cancelled when named
out=$("$BGEXEC" retry --queue run) || fail "retry of many: exit $?"
[[ $out == "queued again: 0 of 0 matching jobs" ]] || fail "retry without cancelled printed: $out"
out=$("$BGEXEC" retry --queue held --status cancelled,failed --json) || fail "retry --status cancelled: exit $?"
[[ $out == '{"matched":2,"retried":2}' ]] || fail "retry --status cancelled printed: $out"
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = 'held' AND status = 'queued'") == 6 ]] \
  || fail "held after the retry: $(sql "SELECT id, status FROM bgexec.job WHERE queue = 'held'")"

# a tenant's stop of many acts on its own jobs only (row-level security)
psql -qX -c "CREATE ROLE e2e_tenant LOGIN; GRANT bgexec_client TO e2e_tenant" >/dev/null
T="host=$PGHOST port=$PGPORT dbname=postgres user=e2e_tenant"
mine=$("$BGEXEC" submit noop --queue held --db "$T") || fail "a tenant's submit"
out=$("$BGEXEC" stop --queue held --db "$T") || fail "a tenant's stop of many: exit $?"
[[ $out == "cancelled: 1, stop requested: 0 (running), of 1 matching jobs" ]] || fail "a tenant's stop of many printed: $out"
[[ $(sql "SELECT string_agg(id::text, ' ') FROM bgexec.job WHERE status = 'cancelled' AND queue = 'held'") == "$mine" ]] \
  || fail "a tenant's stop touched others' jobs: $(sql "SELECT id, owner, status FROM bgexec.job WHERE queue = 'held'")"

# 600 cancelled jobs, a queue that takes 550 more: the first batch of 500
# goes back, the second overflows the cap, is refused whole, and stops it
sql "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'big')) FROM generate_series(1, 600)))" >/dev/null
"$BGEXEC" stop --queue big >/dev/null || fail "stop of 600"
sql "SELECT bgexec.configure_queue('big', max_queued => 550)" >/dev/null
set +e; "$BGEXEC" retry --queue big --status cancelled >"$E2E_DIR/out" 2>"$E2E_DIR/err"; rc=$?; set -e
((rc == 3)) && [[ ! -s $E2E_DIR/out ]] \
  && [[ $(head -1 "$E2E_DIR/err") == "bgexec retry: before the error below, queued again: 500 of 500 matching jobs" ]] \
  && grep -qF '(SQLSTATE 53400)' "$E2E_DIR/err" \
  || fail "retry past the cap: exit $rc, out $(cat "$E2E_DIR/out"), err $(cat "$E2E_DIR/err")"
[[ $(sql "SELECT count(*) FILTER (WHERE status = 'queued') || ' ' || (max(id) FILTER (WHERE status = 'queued') = min(id) + 499) FROM bgexec.job WHERE queue = 'big'") == "500 true" ]] \
  || fail "after the refused batch: $(sql "SELECT status, count(*), min(id), max(id) FROM bgexec.job WHERE queue = 'big' GROUP BY 1")"

# Two retries over the same capped queues at once (by kind: each batch
# spans both queues) take the queues' admission locks in one order, so
# neither deadlocks: in id order, each took them as its jobs came, and one
# died with 40P01 in every round.
sql "SELECT bgexec.configure_queue('da', max_queued => 100000), bgexec.configure_queue('db', max_queued => 100000)" >/dev/null
for round in 1 2 3; do
  sql "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', k, 'queue', q))
         FROM (VALUES ('k1-$round', 'da'), ('k2-$round', 'db'), ('k1-$round', 'db'), ('k2-$round', 'da')) v(k, q),
              generate_series(1, 200)))" >/dev/null
  "$BGEXEC" stop --queue da >/dev/null && "$BGEXEC" stop --queue db >/dev/null || fail "stop da, db"
  "$BGEXEC" retry --kind "k1-$round" --status cancelled >"$E2E_DIR/r1" 2>&1 & r1=$!
  "$BGEXEC" retry --kind "k2-$round" --status cancelled >"$E2E_DIR/r2" 2>&1 & r2=$!
  wait "$r1" || fail "round $round: retry --kind k1: $(cat "$E2E_DIR/r1")"
  wait "$r2" || fail "round $round: retry --kind k2: $(cat "$E2E_DIR/r2")"
  [[ $(cat "$E2E_DIR/r1") == "queued again: 400 of 400 matching jobs" && $(cat "$E2E_DIR/r2") == "queued again: 400 of 400 matching jobs" ]] \
    || fail "round $round: $(cat "$E2E_DIR/r1") / $(cat "$E2E_DIR/r2")"
done

# A batch reads its own jobs, not the history before them: 100 000
# completed jobs older than 300 failed ones and 10 queued ones, and 20 000
# failed ones of another queue.  A status named as a run-time array used no
# partial index, and each first batch walked the primary key (or the table)
# through all 100 000.  The rows the job table gave out
# (pg_stat_user_tables, flushed when the CLI's session ends) stay within a
# few per job acted on.
sql "INSERT INTO bgexec.job (queue, kind, owner, status, result, attempt, started_at, finished_at)
     SELECT 'hist', 'noop', current_user, 'completed', '{}', 1, now(), now() FROM generate_series(1, 100000);
     INSERT INTO bgexec.job (queue, kind, owner, status, error, attempt, started_at, finished_at)
     SELECT 'histf', 'noop', current_user, 'failed', '{}', 1, now(), now() FROM generate_series(1, 20000);
     INSERT INTO bgexec.job (queue, kind, owner, status, error, attempt, started_at, finished_at)
     SELECT 'hist1', 'noop', current_user, 'failed', '{}', 1, now(), now() FROM generate_series(1, 300);
     INSERT INTO bgexec.queue_count VALUES ('hist', 'completed', 100000), ('histf', 'failed', 20000), ('hist1', 'failed', 300)" >/dev/null
sql "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'late')) FROM generate_series(1, 10)))" >/dev/null
sql "VACUUM ANALYZE bgexec.job" >/dev/null
job_reads() { sql "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables WHERE relid = 'bgexec.job'::regclass"; }
reads_since() {  # reads_since N: the reads after N, once the CLI's session has flushed its counts
  local n
  for _ in $(seq 1 50); do n=$(job_reads); ((n > $1)) && break; sleep 0.1; done
  echo $((n - $1))
}
before=$(job_reads)
out=$("$BGEXEC" retry --queue hist1) || fail "retry of hist1: exit $?"
[[ $out == "queued again: 300 of 300 matching jobs" ]] || fail "retry of hist1 printed: $out"
reads=$(reads_since "$before")
((reads < 3000)) || fail "retry of 300 jobs read $reads rows of bgexec.job"
# A queue none of whose jobs ended badly, by a superuser and by a tenant:
# its batch reads job_ended_badly_idx (queue, id).  Taking queue and status
# as independent, the planner expected thousands of hist's jobs to have
# failed, walked the (id) index instead and read histf's 20 000.  (Few
# rows or none: the CLI's counts are in once the scans of the two indexes
# of the jobs that ended badly are.)
bad_scans() { sql "SELECT sum(idx_scan) FROM pg_stat_user_indexes WHERE indexrelid IN ('bgexec.job_ended_badly_idx'::regclass, 'bgexec.job_ended_badly_id_idx'::regclass)"; }
for db in "" "$T"; do
  before=$(job_reads) scans=$(bad_scans)
  out=$("$BGEXEC" retry --queue hist ${db:+--db "$db"}) || fail "retry of hist (${db:-superuser}): exit $?"
  [[ $out == "queued again: 0 of 0 matching jobs" ]] || fail "retry of hist (${db:-superuser}) printed: $out"
  for _ in $(seq 1 50); do (($(bad_scans) > scans)) && break; sleep 0.1; done
  reads=$(($(job_reads) - before))
  ((reads < 100)) || fail "retry of none of hist's jobs (${db:-superuser}) read $reads rows of bgexec.job"
done
before=$(job_reads)
out=$("$BGEXEC" stop --queue late) || fail "stop of late: exit $?"
[[ $out == "cancelled: 10, stop requested: 0 (running), of 10 matching jobs" ]] || fail "stop of late printed: $out"
reads=$(reads_since "$before")
((reads < 1000)) || fail "stop of 10 jobs read $reads rows of bgexec.job"
sql "DELETE FROM bgexec.job WHERE queue IN ('hist', 'histf', 'hist1', 'late')" >/dev/null

# Bad filters: named, nothing changes.
before=$(sql "SELECT string_agg(id || status::text, ',' ORDER BY id) FROM bgexec.job")
expect() {  # expect MESSAGE ARGS...: exit 2, the message on stderr, nothing on stdout
  local msg=$1; shift
  set +e; "$BGEXEC" "$@" >"$E2E_DIR/out" 2>"$E2E_DIR/err"; local rc=$?; set -e
  ((rc == 2)) || fail "bgexec $*: exit $rc (expected 2): $(cat "$E2E_DIR/err")"
  grep -qF -- "$msg" "$E2E_DIR/err" || fail "bgexec $*: $(cat "$E2E_DIR/err")"
  [[ ! -s $E2E_DIR/out ]] || fail "bgexec $* printed: $(cat "$E2E_DIR/out")"
}
expect '--status: retry acts on failed, cancelled or timed_out jobs, got "queued"' retry --status queued
expect '--status: stop acts on queued, suspended or running jobs, got "failed"' stop --queue held --status queued,failed
expect '--status: expected a status, got "cancelled,"' retry --queue big --status cancelled,
expect 'stop takes an ID or --queue, --kind and --status, not both' stop "$mine" --queue held
expect '--limit goes with --queue, --kind or --status (the jobs to retry)' retry --limit 3
expect 'stop takes an ID, or --queue, --kind or --status (the jobs to stop)' stop
expect 'retry takes an ID, or --queue, --kind or --status (the jobs to retry)' retry
expect '--limit: expected an integer from 1 to' stop --queue held --limit 0
expect '--from is not an option of stop' stop --queue held --from 3
[[ $(sql "SELECT string_agg(id || status::text, ',' ORDER BY id) FROM bgexec.job") == "$before" ]] \
  || fail "a refused call changed jobs"

# purge OLDER_THAN [--batch N]: the caller's jobs that ended longer ago,
# oldest first, each batch its own transaction.  Bad arguments are usage
# errors and delete nothing.
sql "UPDATE bgexec.job SET finished_at = now() - interval '2 days' + id * interval '1 second'
      WHERE finished_at IS NOT NULL" >/dev/null
ended_ids() { sql "SELECT string_agg(id::text, ' ' ORDER BY id) FROM bgexec.job WHERE finished_at IS NOT NULL"; }
ended=$(sql "SELECT count(*) FROM bgexec.job WHERE finished_at IS NOT NULL")
((ended > 30)) || fail "too few ended jobs for the purge: $ended"
expect 'OLDER_THAN: invalid input syntax for type interval: "soon"' purge soon
expect '--batch: expected an integer from 1 to 100000, got "0"' purge 1h --batch 0
expect 'purge takes OLDER_THAN' purge
expect '--queue is not an option of purge' purge 1h --queue held
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE finished_at IS NOT NULL") == "$ended" ]] || fail "a refused purge deleted jobs"
# a tenant's purge: its own job only
out=$("$BGEXEC" purge '1 day' --db "$T") || fail "a tenant's purge: exit $?"
[[ $out == "purged 1 job" && $(sql "SELECT count(*) FROM bgexec.job WHERE id = $mine") == 0 ]] \
  || fail "a tenant's purge printed $out; ended jobs left $(sql "SELECT count(*) FROM bgexec.job WHERE finished_at IS NOT NULL")"
ended=$((ended - 1))
# a job whose delete fails stops the purge at its batch: exit 3, the batches
# before it (the oldest: ids in the order the jobs ended) deleted and
# counted, its own not
newest=$(sql "SELECT max(id) FROM bgexec.job WHERE finished_at IS NOT NULL")
all_ended=$(ended_ids)
sql "CREATE FUNCTION e2e_refuse() RETURNS trigger LANGUAGE plpgsql AS \$\$
       BEGIN IF OLD.id = $newest THEN RAISE EXCEPTION 'e2e: not this one'; END IF; RETURN OLD; END \$\$;
     CREATE TRIGGER e2e_refuse BEFORE DELETE ON bgexec.job FOR EACH ROW EXECUTE FUNCTION e2e_refuse()" >/dev/null
set +e; "$BGEXEC" purge 1d --batch 7 >"$E2E_DIR/out" 2>"$E2E_DIR/err"; rc=$?; set -e
left=$(sql "SELECT count(*) FROM bgexec.job WHERE finished_at IS NOT NULL")
purged=$(((ended - 1) / 7 * 7))
((rc == 3)) && [[ ! -s $E2E_DIR/out ]] && ((left == ended - purged)) \
  && [[ $(head -1 "$E2E_DIR/err") == "bgexec purge: before the error below, purged $purged jobs" ]] \
  && grep -qF 'e2e: not this one' "$E2E_DIR/err" \
  || fail "purge past a refused delete: exit $rc, $left of $ended left, out $(cat "$E2E_DIR/out"), err $(cat "$E2E_DIR/err")"
[[ $(ended_ids) == "$(tr ' ' '\n' <<<"$all_ended" | tail -n "$left" | paste -sd ' ')" ]] \
  || fail "the purge did not go oldest first: left $(ended_ids)"
sql "DROP TRIGGER e2e_refuse ON bgexec.job" >/dev/null
# --status: only jobs that ended so (those left are all cancelled); a live
# status is a usage error
expect '--status: purge deletes only jobs that ended: completed, failed, cancelled, timed_out (got queued)' \
  purge 1d --status completed,queued
expect '--status: unknown status "done"' purge 1d --status done
[[ $(sql "SELECT count(*) FROM bgexec.job WHERE finished_at IS NOT NULL AND status <> 'cancelled'") == 0 ]] \
  || fail "jobs that ended otherwise than cancelled: $(sql "SELECT status, count(*) FROM bgexec.job GROUP BY 1")"
out=$("$BGEXEC" purge 1d --status completed,failed,timed_out) || fail "purge --status: exit $?"
[[ $out == "purged 0 jobs" && $(sql "SELECT count(*) FROM bgexec.job WHERE finished_at IS NOT NULL") == "$left" ]] \
  || fail "purge --status completed,failed,timed_out printed $out"
out=$("$BGEXEC" purge 1d --batch 7 --json) || fail "purge: exit $?"
[[ $out == "{\"purged\":$left}" && $(sql "SELECT count(*) FROM bgexec.job WHERE finished_at IS NOT NULL") == 0 ]] \
  || fail "purge printed $out; ended jobs left $(sql "SELECT count(*) FROM bgexec.job WHERE finished_at IS NOT NULL")"
ok

#!/usr/bin/env bash
# A job's wake goes to a worker that lists its queue among at most 32
# (extension/wake.c: its slot keeps the queues exactly) before a worker of
# more than 32 (kept in a Bloom filter, which may match a queue it does not
# list): both list b1 here, x of b1 alone, m of b1 and 39 more.  The slots
# that list the queue are tier 0, sleepers then callers; the slots of many
# queues only get the jobs left over.  A wake loop that ordered its
# sleepers by the time they went to sleep alone gave m the wakes when it
# went to sleep last (with a false match, a wake claimed for nothing, and
# the job waited for its worker's poll), and so did one that put the slots
# of many queues first.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58025 "shared_preload_libraries = 'bgexec'"

qs() { local i out=(b1); for ((i = 2; i <= 40; i++)); do out+=("c$i"); done; (IFS=,; echo "${out[*]}"); }
# --poll 30: a worker's own poll claims nothing during the test.
start_worker x --queue b1 --concurrency 10 --poll 30 --lease 30
start_worker m --queue "$(qs)" --concurrency 10 --poll 30 --lease 30
for w in x m; do
  wait_for 10 grep -q 'msg=listening via=await_claim' "$E2E_DIR/$w.log" || fail "$w does not wait in await_claim"
done
# Past both workers' first poll (a claim at their start).
sleep 1

# 30 noop jobs of b1, each in its own transaction, each after a job of c2
# (m's alone), 0.1 s apart: at each commit of a b1 job both workers are
# asleep in await_claim, m the later to sleep (woken for the c2 job, it
# claimed it and went back to sleep after x did).
for ((i = 0; i < 30; i++)); do
  echo "SELECT bgexec.submit('noop', '{}', 'c2'); SELECT pg_sleep(0.1);"
  echo "SELECT bgexec.submit('noop', '{}', 'b1'); SELECT pg_sleep(0.1);"
done | psql -qXAt -v ON_ERROR_STOP=1 >/dev/null || fail "submits"
all_done() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE status <> 'completed'") == 0 ]]; }
wait_for 40 all_done || fail "jobs did not complete"
by=$(sql "SELECT string_agg(e.data->>'worker' || '=' || e.n, ' ' ORDER BY e.data->>'worker')
            FROM (SELECT e.data, count(*) OVER (PARTITION BY e.data->>'worker') AS n,
                         row_number() OVER (PARTITION BY e.data->>'worker') AS r
                    FROM bgexec.job_event e JOIN bgexec.job j ON j.id = e.job_id
                   WHERE j.queue = 'b1' AND e.kind = 'started') e WHERE e.r = 1")
echo "# 30 jobs of b1, started by: $by"
[[ $by == "x=30" ]] || fail "jobs of b1 were claimed by the worker of 40 queues ($by), not all by x, which lists b1 alone"
for p in "$PID_x" "$PID_m"; do kill -0 "$p" || fail "worker $p died"; done
ok

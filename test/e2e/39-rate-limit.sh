#!/usr/bin/env bash
# A queue's rate limit with real workers: 40 jobs submitted at once to a
# queue limited to 10 starts a second (a bucket of 10 tokens) start over
# about three seconds, never 21 of them within a second, each once, on two
# workers that poll once a minute: a job the limit held back is started
# when its token is due (the claim that held it back woke a waiting worker
# then), not at the next poll.  Removing the limit starts the rest at once.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57993

sql "SELECT bgexec.configure_queue('paced', rate_limit => 10, rate_period => '1 second')" >/dev/null
start_worker w1 --queue paced --concurrency 8 --poll 60
start_worker w2 --queue paced --concurrency 8 --poll 60
ready() { [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%await_claim%' AND state = 'active'") -ge 2 ]]; }
wait_for 20 ready || fail "the workers do not wait on the queue"

sql "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'paced')) FROM generate_series(1, 40)))" >/dev/null
done_() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = 'paced' AND status = 'completed'") == 40 ]]; }
wait_for 30 done_ || fail "the jobs did not all run within 30 s (the workers poll once a minute): $(sql "SELECT status, count(*) FROM bgexec.job GROUP BY 1")"

# Each job started once, on its first attempt.
[[ $(sql "SELECT count(*) FROM bgexec.job_event WHERE kind = 'started'") == 40 \
   && $(sql "SELECT count(*) FROM bgexec.job WHERE attempt <> 1") == 0 ]] || fail "a job started twice"
# At most 10 + 10 * T starts in any span T: 21 starts take at least 1.1 s
# (0.9 s allowed: a claim's clock is read before it waits for the queue's
# lock), and the 40 at least 3 s (2.5 s allowed).
tight=$(sql "SELECT count(*) FROM (SELECT started_at, lead(started_at, 20) OVER (ORDER BY started_at) AS later
                                     FROM bgexec.job WHERE queue = 'paced') s
              WHERE later - started_at < interval '0.9 s'")
[[ $tight == 0 ]] || fail "21 jobs started within 0.9 s: $(sql "SELECT started_at FROM bgexec.job ORDER BY 1")"
span=$(sql "SELECT extract(epoch FROM max(started_at) - min(started_at)) FROM bgexec.job WHERE queue = 'paced'")
awk -v s="$span" 'BEGIN { exit !(s >= 2.5) }' || fail "40 jobs started within $span s"

# The limit removed: the queue's waiting workers are woken, the next 40
# start at once.
"$BGEXEC" configure-queue paced --rate-limit 1 >/dev/null
sql "SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', 'paced')) FROM generate_series(1, 40)))" >/dev/null
sleep 1
"$BGEXEC" configure-queue paced --rate-limit none >/dev/null
all_done() { [[ $(sql "SELECT count(*) FROM bgexec.job WHERE queue = 'paced' AND status = 'completed'") == 80 ]]; }
wait_for 20 all_done || fail "the limit removed, the jobs did not run: $(sql "SELECT status, count(*) FROM bgexec.job GROUP BY 1")"
ok "span $span s"

#!/usr/bin/env bash
# While the database is away, the gateway's log says so about once per
# 10 s, however many event streams are open: every stream polls every 3 s,
# and each failed poll was a warning, so 20 streams wrote about 50 lines in
# the 8 s outage below (a thousand streams, hundreds a second).  The line
# written carries how many were held back.  After the outage the streams
# follow their jobs again.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57988
start_gateway
id=$("$BGEXEC" submit noop --queue nobody) || fail submit
for i in $(seq 1 20); do
  curl -sN -H "Authorization: Bearer t" "$url/v1/jobs/$id/events" >"$E2E_DIR/stream-$i.txt" 2>/dev/null &
  E2E_PIDS+=($!)
done
streaming() { (($(grep -l 'retry: 2000' "$E2E_DIR"/stream-*.txt 2>/dev/null | wc -l) == 20)); }
wait_for 10 streaming || fail "the 20 streams did not start: $(head -c 300 "$E2E_DIR/stream-1.txt")"

pid=$(cat "$E2E_DIR/pg/postmaster.pid.started")
kill -QUIT "$pid"
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
sleep 8
lines=$(grep -c 'msg="event fetch failed"' "$E2E_DIR/serve.log" || true)
((lines >= 1 && lines <= 2)) || fail "$lines 'event fetch failed' lines in 8 s of outage with 20 streams"
as=(); [[ $(id -u) -eq 0 ]] && as=(runuser -u postgres --)
"${as[@]}" "$PGBIN/pg_ctl" -D "$E2E_DIR/pg/data" -l "$E2E_DIR/pg/postgres.log" -w -t 60 start >/dev/null \
  || fail "PostgreSQL did not come back"
head -1 "$E2E_DIR/pg/data/postmaster.pid" >"$E2E_DIR/pg/postmaster.pid.started"

# Back: a stop of the job reaches every stream.
wait_for 20 "$BGEXEC" stop "$id" >/dev/null 2>&1 || fail "the job could not be stopped after the outage"
cancelled() { (($(grep -l 'cancelled' "$E2E_DIR"/stream-*.txt | wc -l) == 20)); }
wait_for 20 cancelled || fail "$(grep -L cancelled "$E2E_DIR"/stream-*.txt | wc -l) streams missed the stop after the outage"
grep 'msg="event fetch failed"' "$E2E_DIR/serve.log" | tail -1 | grep -q 'skipped=' || fail "the line does not say how many were held back"
ok "$lines lines in 8 s of outage"

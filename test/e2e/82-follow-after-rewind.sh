#!/usr/bin/env bash
# An asynchronous failover that loses the newest transactions rewinds a
# job's log: the new primary's last_seq is below what readers saw, and new
# events take the lost ones' seqs.  A follower (`bgexec tail`, submit
# --wait) and the gateway's event stream say so and go on after last_seq,
# printing the new events and ending with the job.  They waited for seqs
# past their old cursor, for ever after the job ended below it, and skipped
# the new events.  The failover is played here without replication: in one
# transaction the superuser deletes the events past seq 4 and sets last_seq
# to 4, as a standby promoted with only those would have them, and ends the
# readers' sessions so they reconnect, as a failover would.  Then the job
# goes on below the readers' position (job 1), or (job 2) writes new events
# past it before the readers reconnect: the event at their position is then
# another (its created_at), and they go on from the first new one.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58001
start_gateway
# add_progress JOB TO [quiet]: progress events after last_seq up to seq TO,
# as a run writes them; quiet: no notification (the failover's new events:
# no reader is connected to the new primary before the failover).
add_progress() {
  sql "BEGIN;
       INSERT INTO bgexec.job_event (job_id, seq, kind, data)
         SELECT $1, g, 'progress', jsonb_build_object('n', g)
         FROM generate_series((SELECT last_seq + 1 FROM bgexec.job WHERE id = $1), $2) g;
       UPDATE bgexec.job SET last_seq = $2 WHERE id = $1;
       SELECT pg_notify('bgexec_events', '$1:$2') WHERE '${3:-}' = '';
       COMMIT" >/dev/null
}
# follow JOB: tail and an event stream of JOB, until both read seq 10.
follow() {
  "$BGEXEC" tail "$1" --json >"$E2E_DIR/tail-$1.out" 2>"$E2E_DIR/tail-$1.err" &
  tail_pid=$!
  E2E_PIDS+=("$tail_pid")
  curl -sN -H "Authorization: Bearer t" "$url/v1/jobs/$1/events" >"$E2E_DIR/stream-$1.txt" 2>/dev/null &
  curl_pid=$!
  E2E_PIDS+=("$curl_pid")
  wait_for 20 grep -q '"seq":10' "$E2E_DIR/tail-$1.out" || fail "tail did not reach seq 10: $(cat "$E2E_DIR/tail-$1.err")"
  wait_for 20 grep -q '^id: 10$' "$E2E_DIR/stream-$1.txt" || fail "the stream did not reach seq 10"
}
# rewind JOB [TO]: the failover: events past 4 lost, then (TO) new ones up to TO.
rewind() {
  sql "BEGIN;
       DELETE FROM bgexec.job_event WHERE job_id = $1 AND seq > 4;
       UPDATE bgexec.job SET last_seq = 4 WHERE id = $1;
       COMMIT" >/dev/null
  [[ -z ${2:-} ]] || add_progress "$1" "$2" quiet
  sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
       WHERE application_name IN ('bgexec tail client') OR application_name LIKE 'bgexec serve%'" >/dev/null
}
# ended JOB RC SEQS IDS: tail exited RC having printed SEQS, the stream sent IDS and closed.
ended() {
  wait_for 20 gone "$tail_pid" || fail "tail did not end with job $1: $(cat "$E2E_DIR/tail-$1.err")"
  local rc=0; wait "$tail_pid" || rc=$?
  ((rc == $2)) || fail "tail exited $rc ($2 expected): $(cat "$E2E_DIR/tail-$1.err")"
  local seqs ids
  seqs=$(sed -n 's/.*"seq":\([0-9]*\).*/\1/p' "$E2E_DIR/tail-$1.out" | tr '\n' ' ')
  [[ $seqs == "$3" ]] || fail "tail of job $1 printed seqs '$seqs', not '$3'"
  wait_for 20 gone "$curl_pid" || fail "the stream of job $1 did not end with the job"
  ids=$(sed -n 's/^id: //p' "$E2E_DIR/stream-$1.txt" | tr '\n' ' ')
  [[ $ids == "$4" ]] || fail "the stream of job $1 sent ids '$ids', not '$4'"
  grep -q '^event: cancelled$' "$E2E_DIR/stream-$1.txt" || fail "the stream of job $1 sent no cancelled event"
}

# Job 1: rewound to 4, goes on below the readers' position, ends at 6.
id=$("$BGEXEC" submit noop --queue nobody) || fail submit
add_progress "$id" 10
follow "$id"
rewind "$id"
want="bgexec: job $id's event log was rewound by a failover: this follow was at event 10, the job's last event is now 4; events after 4 are not the ones this follow read, following from there"
wait_for 20 grep -qF "$want" "$E2E_DIR/tail-$id.err" \
  || fail "tail did not report the rewound log: $(cat "$E2E_DIR/tail-$id.err")"
# The stream finds it at its next poll (3 s) or once its listener is back.
wait_for 20 grep -q '^event: rewound$' "$E2E_DIR/stream-$id.txt" || fail "the stream sent no rewound event"
grep -B1 '^event: rewound$' "$E2E_DIR/stream-$id.txt" | grep -q '^id: 4$' || fail "the rewound event's id is not 4"
grep -q '^data: {"after":10,"last_seq":4,"resume":4}$' "$E2E_DIR/stream-$id.txt" \
  || fail "the rewound event's data: $(cat "$E2E_DIR/stream-$id.txt")"
add_progress "$id" 5
"$BGEXEC" stop "$id" >/dev/null || fail stop
[[ $(sql "SELECT last_seq FROM bgexec.job WHERE id = $id") == 6 ]] || fail "job $id did not end at seq 6"
ended "$id" 1 "1 2 3 4 5 6 7 8 9 10 5 6 " "1 2 3 4 5 6 7 8 9 10 4 5 6 "
(($(grep -c "rewound" "$E2E_DIR/tail-$id.err") == 1)) || fail "tail reported the rewind more than once"

# Job 2: rewound to 4 and written up to 12, past the readers' position,
# before they reconnect: they go on after 4.
id=$("$BGEXEC" submit noop --queue nobody) || fail submit
add_progress "$id" 10
follow "$id"
sleep 0.1  # the new events' created_at later than the ones read, as after a failover
rewind "$id" 12
want="bgexec: job $id's event log was rewound by a failover: this follow was at event 10, the job's last event is now 12; events after 4 are not the ones this follow read, following from there"
wait_for 20 grep -qF "$want" "$E2E_DIR/tail-$id.err" \
  || fail "tail did not report the log rewound and written past it: $(cat "$E2E_DIR/tail-$id.err")"
wait_for 20 grep -q '^data: {"after":10,"last_seq":12,"resume":4}$' "$E2E_DIR/stream-$id.txt" \
  || fail "the stream did not report the log rewound and written past it: $(cat "$E2E_DIR/stream-$id.txt")"
"$BGEXEC" stop "$id" >/dev/null || fail stop
ended "$id" 1 "1 2 3 4 5 6 7 8 9 10 5 6 7 8 9 10 11 12 13 " "1 2 3 4 5 6 7 8 9 10 4 5 6 7 8 9 10 11 12 13 "
ok "tail and the event stream reported the rewound logs, sent the new events and ended with the jobs"

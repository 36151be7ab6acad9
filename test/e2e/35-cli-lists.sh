#!/usr/bin/env bash
# bgexec jobs: the jobs the caller can see, newest first, a page at a time,
# filtered by queue and status; a failed job's error on its line; --json
# pages that a script can walk with next_before; a client role sees its own
# jobs only; bad options are usage errors naming the option.  bgexec
# workers: the live workers with their jobs in flight; --all the stopped ones
# too.
source "$(dirname "$0")/lib.sh"
e2e_cluster 57974

for q in a a a b b; do sql "SELECT bgexec.submit('noop', '{}', '$q')" >/dev/null; done
"$BGEXEC" stop 5 >/dev/null || fail "stop 5"
# A failed job, finished through the worker functions; its message holds a
# tab and a newline, which would break the line it is listed on.
sql "SELECT bgexec.submit('export', '{}', 'c')" >/dev/null
sql "SELECT bgexec.register_worker('t', '{c}', 1, '{}')" >/dev/null
lease=$(sql "SELECT lease FROM bgexec.claim('t', '{c}', 1)")
[[ $(sql "SELECT bgexec.finish(6, $lease, 'failed', '{\"message\": \"disk\tfull\nagain\", \"retryable\": false}')") == failed ]] \
  || fail "job 6 did not fail"
sql "SELECT bgexec.deregister_worker('t')" >/dev/null
psql -qX -c "CREATE ROLE e2e_tenant LOGIN; GRANT bgexec_client TO e2e_tenant" >/dev/null
tenant="host=$PGHOST port=$PGPORT dbname=postgres user=e2e_tenant"
[[ $("$BGEXEC" submit noop --queue a --db "$tenant") == 7 ]] || fail "the tenant's submit"

out=$("$BGEXEC" jobs) || fail "bgexec jobs: exit $?"
[[ $(head -1 <<<"$out") == $'id\tstatus\tqueue\tkind\tattempt\tcreated_at\tfinished_at\terror' ]] || fail "header: $out"
[[ $(tail -n +2 <<<"$out" | cut -f1 | tr '\n' ' ') == "7 6 5 4 3 2 1 " ]] || fail "a superuser lists every job, newest first: $out"
grep -qP '^6\tfailed\tc\texport\t1/1\t20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ\t20\d\d-[^\t]*Z\tdisk full again$' <<<"$out" \
  || fail "the failed job's line: $(grep '^6' <<<"$out")"
grep -qP '^3\tqueued\ta\tnoop\t0/1\t[^\t]+Z\t-\t-$' <<<"$out" || fail "a queued job's line: $(grep '^3' <<<"$out")"
out=$("$BGEXEC" jobs --db "$tenant") || fail "the tenant's bgexec jobs"
[[ $(tail -n +2 <<<"$out" | cut -f1 | tr '\n' ' ') == "7 " ]] || fail "a tenant lists its own jobs only: $out"

out=$("$BGEXEC" jobs --queue b --status cancelled)
[[ $(tail -n +2 <<<"$out" | cut -f1,2,3) == $'5\tcancelled\tb' ]] || fail "--queue b --status cancelled: $out"
out=$("$BGEXEC" jobs --queue a --status queued)
[[ $(tail -n +2 <<<"$out" | cut -f1 | tr '\n' ' ') == "7 3 2 1 " ]] || fail "--queue a --status queued: $out"

# Pages: the last line names the next page's --before; the last page has none.
out=$("$BGEXEC" jobs --limit 3)
[[ $(tail -1 <<<"$out") == "(more: bgexec jobs --limit 3 --before 5)" ]] || fail "first page: $out"
out=$("$BGEXEC" jobs --limit 3 --before 5)
[[ $(sed -n '2,4p' <<<"$out" | cut -f1 | tr '\n' ' ') == "4 3 2 " && $(tail -1 <<<"$out") == "(more: bgexec jobs --limit 3 --before 2)" ]] \
  || fail "second page: $out"
out=$("$BGEXEC" jobs --limit 3 --before 2)
[[ $(tail -n +2 <<<"$out" | cut -f1 | tr '\n' ' ') == "1 " ]] || fail "last page: $out"
# the line is the next page's command with this one's filters (it named
# --before alone, and run as shown listed every job)
out=$("$BGEXEC" jobs --queue a --kind noop --status queued --limit 2)
more=$(tail -1 <<<"$out")
[[ $more == "(more: bgexec jobs --queue a --kind noop --status queued --limit 2 --before 3)" ]] || fail "filtered page: $out"
more=${more#(more: bgexec }
out=$("$BGEXEC" ${more%)}) || fail "the printed command"
[[ $(tail -n +2 <<<"$out" | cut -f1 | tr '\n' ' ') == "2 1 " ]] || fail "the printed command's page: $out"
# --status takes a comma-separated list, as stop's and retry's do (the
# server refused "failed,cancelled" as no value of its enum, exit 3).
out=$("$BGEXEC" jobs --status failed,cancelled) || fail "jobs --status failed,cancelled: exit $?"
[[ $(tail -n +2 <<<"$out" | cut -f1,2 | tr '\n' ' ') == $'6\tfailed 5\tcancelled ' ]] || fail "--status failed,cancelled: $out"
out=$("$BGEXEC" jobs --status cancelled,queued,cancelled --queue b)
[[ $(tail -n +2 <<<"$out" | cut -f1 | tr '\n' ' ') == "5 4 " ]] || fail "--status cancelled,queued,cancelled: $out"
out=$("$BGEXEC" jobs --status failed,cancelled --limit 1)
[[ $(tail -1 <<<"$out") == "(more: bgexec jobs --status failed,cancelled --limit 1 --before 6)" ]] || fail "a list's page: $out"
python3 - "$BGEXEC" <<'PY' || fail "walking the --json pages of --status failed,cancelled"
import json, subprocess, sys
ids, before = [], None
while True:
    args = [sys.argv[1], "jobs", "--json", "--status", "failed,cancelled", "--limit", "1"]
    args += ["--before", str(before)] if before else []
    page = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    ids += [j["id"] for j in page["jobs"]]
    before = page["next_before"]
    if before is None:
        break
assert ids == [6, 5], ids
PY
# A refused resume or retry says the job's status (exit 1, as documented).
set +e; out=$("$BGEXEC" resume 1); rc=$?; set -e
((rc == 1)) && [[ $out == "job 1 is queued, not suspended: nothing to resume" ]] || fail "resume 1: exit $rc: $out"
set +e; "$BGEXEC" retry 2 >"$E2E_DIR/out"; rc=$?; set -e
((rc == 1)) && [[ $(cat "$E2E_DIR/out") == "job 2 is queued, not failed, cancelled or timed out: nothing to retry" ]] \
  || fail "retry 2: exit $rc: $(cat "$E2E_DIR/out")"
# Ctrl-C ends a follow, not the job: a line says so, exit 130 (it was
# silent, and the job going on looked stopped).  (env: a script's
# background job has SIGINT ignored, which the client leaves so.)
env --default-signal=INT "$BGEXEC" tail 1 >"$E2E_DIR/tail.out" 2>"$E2E_DIR/tail.err" & tpid=$!
wait_for 10 grep -q '^note: no live worker claims from queue a' "$E2E_DIR/tail.err" || fail "tail 1: $(cat "$E2E_DIR/tail.err")"
kill -INT "$tpid"
set +e; wait "$tpid"; rc=$?; set -e
((rc == 130)) || fail "tail 1 after SIGINT: exit $rc: $(cat "$E2E_DIR/tail.err")"
[[ $(tail -1 "$E2E_DIR/tail.err") == "bgexec: stopped following job 1; it goes on (bgexec stop 1 stops it)" ]] \
  || fail "tail 1 after SIGINT said: $(cat "$E2E_DIR/tail.err")"
[[ $(sql "SELECT status FROM bgexec.job WHERE id = 1") == queued ]] || fail "job 1 after the tail's SIGINT"

# --json: a script walks next_before to the end and sees every job once.
python3 - "$BGEXEC" <<'PY' || fail "walking the --json pages"
import json, subprocess, sys
ids, before = [], None
while True:
    args = [sys.argv[1], "jobs", "--json", "--limit", "2"] + (["--before", str(before)] if before else [])
    page = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    assert set(page) == {"jobs", "next_before"}, page
    ids += [j["id"] for j in page["jobs"]]
    before = page["next_before"]
    if before is None:
        break
    assert before == ids[-1], page
assert ids == [7, 6, 5, 4, 3, 2, 1], ids
six = json.loads(subprocess.run([sys.argv[1], "jobs", "--json", "--status", "failed"], check=True,
                                capture_output=True, text=True).stdout)["jobs"][0]
assert six["id"] == 6 and six["owner"] == "postgres" and six["error"]["retryable"] is False, six
assert "payload" not in six and "result" not in six, six
PY

# A long message is cut to 200 bytes before a character, not inside one.
sql "SELECT bgexec.submit('export', '{}', 'long')" >/dev/null
lease=$(sql "SELECT lease FROM bgexec.claim('t', '{long}', 1)")
sql "SELECT bgexec.finish(8, $lease, 'failed', jsonb_build_object('message', 'x' || repeat('é', 150), 'retryable', false))" >/dev/null
sql "SELECT bgexec.deregister_worker('t')" >/dev/null
line=$("$BGEXEC" jobs --queue long | tail -1)
[[ $(cut -f8 <<<"$line") == "x$(printf 'é%.0s' {1..99})..." ]] || fail "a long message's cut: $line"
iconv -f UTF-8 -t UTF-8 <<<"$line" >/dev/null || fail "a long message cut inside a character: $line"

# workers: a live one with its job in flight; once stopped, only --all lists it.
start_worker wlist --queue w --concurrency 2
l=$("$BGEXEC" submit workflow --queue w '{"steps": [{"id": "s", "sleep": 60}]}')
wait_status "$l" running
listed() { "$BGEXEC" workers | grep -qP '^wlist\t[^\t]+\t\d+\tw\t2\t1\ttrue\t[^\t]+Z\t[^\t]+Z\t-$'; }
wait_for 10 listed || fail "bgexec workers: $("$BGEXEC" workers)"
# (its start line's lease in the shortest form: it read lease_s=2.000000)
grep -q 'msg="worker started".* lease_s=2$' "$E2E_DIR/wlist.log" \
  || fail "the worker's start line: $(grep 'worker started' "$E2E_DIR/wlist.log")"
python3 - "$BGEXEC" <<'PY' || fail "bgexec workers --json: $("$BGEXEC" workers --json)"
import json, subprocess, sys
rows = json.loads(subprocess.run([sys.argv[1], "workers", "--json"], check=True, capture_output=True, text=True).stdout)
w = [r for r in rows if r["id"] == "wlist"][0]
assert w["queues"] == ["w"] and w["in_flight"] == 1 and w["alive"] is True and w["stopped_at"] is None, w
PY
"$BGEXEC" stop "$l" >/dev/null
wait_status "$l" cancelled
kill -TERM "$PID_wlist"
wait_for 20 gone "$PID_wlist" || fail "wlist did not stop"
out=$("$BGEXEC" workers)
[[ $out == $'id\thost\tpid\tqueues\tconcurrency\tin_flight\talive\tstarted_at\theartbeat_at\tstopped_at' ]] \
  || fail "a stopped worker is listed: $out"
"$BGEXEC" workers --all | grep -qP '^wlist\t.*\tw\t2\t0\tfalse\t.*Z$' || fail "bgexec workers --all: $("$BGEXEC" workers --all)"

# expect_usage NEEDLE ARGS...: exit 2 and NEEDLE in the message.
expect_usage() {
  local needle=$1 rc; shift
  set +e; "$BGEXEC" "$@" >"$E2E_DIR/out" 2>"$E2E_DIR/err"; rc=$?; set -e
  ((rc == 2)) || fail "bgexec $*: exit $rc (expected 2): $(cat "$E2E_DIR/err")"
  grep -qF -- "$needle" "$E2E_DIR/err" || fail "bgexec $*: message does not name $needle: $(cat "$E2E_DIR/err")"
  [[ ! -s $E2E_DIR/out ]] || fail "bgexec $*: printed $(cat "$E2E_DIR/out")"
}
expect_usage '--status: unknown status "done" (a job is queued, running, suspended, completed, failed, cancelled or timed_out)' jobs --status done
expect_usage '--limit: expected an integer from 1 to 500, got "0"' jobs --limit 0
expect_usage '--limit: expected an integer from 1 to 500, got "501"' jobs --limit 501
expect_usage '--before: expected an integer from 1' jobs --before abc
expect_usage 'jobs takes no arguments' jobs 4
expect_usage '--from is not an option of jobs' jobs --from 1
expect_usage '--status is not an option of submit' submit noop --status queued
expect_usage 'workers takes no arguments' workers x
expect_usage '--all is not an option of jobs' jobs --all

# status's times in UTC ISO 8601, as the listings' (the server's text:
# 2026-12-06 21:59:37.51726+00), to the millisecond
"$BGEXEC" status 6 >"$E2E_DIR/status.out" || true
grep -qP '^created_at: 20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$' "$E2E_DIR/status.out" || fail "status: $(cat "$E2E_DIR/status.out")"
grep -qP '^finished_at: 20\d\d-[^ ]*Z$' "$E2E_DIR/status.out" || fail "status: $(cat "$E2E_DIR/status.out")"
# Every --json time is UTC ISO 8601 to the microsecond, whatever the
# session's DateStyle and TimeZone (they were the server's text in those:
# "12/06/2026 19:13:03.914461 EST"), and exactly the stored value.
python3 - "$BGEXEC" <<'PY' || fail "--json times under DateStyle SQL in America/New_York"
import json, os, re, subprocess, sys
env = dict(os.environ, PGTZ="America/New_York", PGDATESTYLE="SQL, MDY")
def run(*args, lines=False):
    out = subprocess.run([sys.argv[1], *args, "--json"], capture_output=True, text=True, env=env).stdout
    return [json.loads(l) for l in out.splitlines()] if lines else json.loads(out)
iso = re.compile(r"^20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
def times(obj, *keys):
    for k in keys:
        assert obj[k] is None or iso.match(obj[k]), (k, obj[k])
    return [obj[k] for k in keys]
st = run("status", "6")
times(st, "created_at", "started_at", "finished_at", "run_after", "deadline")
assert st["finished_at"] is not None, st
for j in run("jobs", "--limit", "3")["jobs"]:
    times(j, "created_at", "started_at", "finished_at")
for e in run("tail", "6", lines=True):
    times(e, "created_at")
for w in run("workers", "--all"):
    times(w, "started_at", "heartbeat_at", "stopped_at")
subprocess.run([sys.argv[1], "schedule", "times35", "0 3 * * *", "noop"], check=True, capture_output=True, env=env)
scheds = run("schedules")
assert [x["name"] for x in scheds] == ["times35"], scheds
for x in scheds:
    assert times(x, "next_run_at", "last_run_at")[0] is not None, x
# the stored value to the microsecond
exact = subprocess.run(["psql", "-XAtc", "SELECT to_char(created_at AT TIME ZONE 'UTC',"
                        " 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM bgexec.job WHERE id = 6"],
                       capture_output=True, text=True, check=True).stdout.strip()
assert st["created_at"] == exact, (st["created_at"], exact)
PY

# tail's lines for the database's own events read as sentences (they were
# their raw JSON: `retry_scheduled {"attempt":1,"delay_ms":306,...}`).
r=$(sql "SELECT bgexec.submit('noop', '{}', 'rt', max_attempts => 2)")
sql "SELECT bgexec.configure_queue('rt', retry_base => '300 ms', retry_cap => '300 ms')" >/dev/null
lease=$(sql "SELECT lease FROM bgexec.claim('t2', '{rt}', 1)")
sql "SELECT bgexec.finish($r, $lease, 'failed', '{\"message\": \"boom\"}')" >/dev/null
sql "UPDATE bgexec.job SET run_after = now() WHERE id = $r" >/dev/null
lease=$(sql "SELECT lease FROM bgexec.claim('t2', '{rt}', 1)")
sql "SELECT bgexec.stop($r)" >/dev/null
sql "SELECT bgexec.finish($r, $lease, 'cancelled', '{\"message\": \"stopped\"}')" >/dev/null
"$BGEXEC" retry "$r" >/dev/null || fail "retry $r"
"$BGEXEC" stop "$r" >/dev/null || fail "stop $r"
"$BGEXEC" tail "$r" >"$E2E_DIR/tail.out" 2>&1 || true
grep -qE '^\[2\] retry in 0(\.[0-9]+)? s after attempt 1: boom$' "$E2E_DIR/tail.out" || fail "tail: retry: $(cat "$E2E_DIR/tail.out")"
grep -qx '\[4\] stop requested by postgres' "$E2E_DIR/tail.out" || fail "tail: stop: $(cat "$E2E_DIR/tail.out")"
grep -qx '\[6\] retry requested by postgres (it was cancelled)' "$E2E_DIR/tail.out" || fail "tail: retry: $(cat "$E2E_DIR/tail.out")"
ok

#!/usr/bin/env bash
# CLI arguments the database never sees: a bad number is a usage error (exit
# 2) naming the argument, never a database error (exit 3); the help texts
# agree on resume's argument.  No cluster: nothing here may reach one.
source "$(dirname "$0")/lib.sh"
export PGHOST=/nonexistent PGPORT=1 BGEXEC_DB="host=/nonexistent port=1 connect_timeout=1"

# expect_usage NEEDLE ARGS...: exit 2 and NEEDLE in the message.
expect_usage() {
  local needle=$1 rc; shift
  # (timeout: a worker that took a bad value would run on, retrying its connection)
  set +e; timeout 10 "$BGEXEC" "$@" >"$E2E_DIR/out" 2>"$E2E_DIR/err"; rc=$?; set -e
  ((rc == 2)) || fail "bgexec $*: exit $rc (expected 2): $(cat "$E2E_DIR/err")"
  grep -qF -- "$needle" "$E2E_DIR/err" || fail "bgexec $*: message does not name $needle: $(cat "$E2E_DIR/err")"
}

expect_usage '--from: expected an integer from 0 to 2147483647, got "abc"' tail 4 --from abc
expect_usage '--from' tail 4 --from=-1
expect_usage '--from' tail 4 --from 99999999999
expect_usage 'invalid job id "abc"' tail abc
expect_usage 'invalid job id "+4"' status +4
expect_usage 'invalid job id "99999999999999999999"' stop 99999999999999999999
expect_usage 'invalid job id "4x"' resume 4x
expect_usage 'invalid job id "0"' status 0
expect_usage 'invalid job id ""' retry ""
expect_usage '--priority: expected an integer' submit noop --priority high
expect_usage '--priority' submit noop --priority 2147483648
expect_usage '--max-attempts: expected an integer from 1' submit noop --max-attempts 0
expect_usage '--max-attempts' submit noop --max-attempts 3.5
# a bare word is text the shell passed unquoted: how to write JSON, not the
# parser's "invalid literal; last read: 'h'"
expect_usage "bgexec submit: invalid JSON: hello is no JSON value: an object is written '{\"key\": \"value\"}', text as a JSON string, '\"hello\"'" submit noop hello
expect_usage "bgexec resume: invalid JSON: yes is no JSON value" resume 1 yes
expect_usage "invalid JSON: parse error at line 1, column 5" submit noop truex
expect_usage 'resume takes ID [JSON|@FILE]' resume
expect_usage 'schedule takes NAME CRON KIND [JSON|@FILE]' schedule nightly '@daily'
expect_usage '--max-attempts: expected an integer from 1' schedule n '@daily' noop --max-attempts 0
expect_usage 'unschedule takes NAME' unschedule
expect_usage 'schedules takes no arguments' schedules x
expect_usage 'queues takes no arguments' queues x y
# An option error shows the command's own usage, not the whole text (70
# lines that scrolled the error out of sight): its usage lines, the common
# options, and where the rest is.
for cmd in submit status jobs tail stop resume retry reschedule queues pause-queue resume-queue configure-queue \
  workers schedule unschedule pause-schedule resume-schedule run-schedule schedules purge; do
  expect_usage "bgexec $cmd: unknown option --zz" "$cmd" --zz
  grep -q "^  bgexec $cmd " "$E2E_DIR/err" || grep -qx "  bgexec $cmd" "$E2E_DIR/err" \
    || fail "bgexec $cmd --zz: no usage line of $cmd: $(cat "$E2E_DIR/err")"
  others=$(grep '^  bgexec ' "$E2E_DIR/err" | grep -v -e "^  bgexec $cmd " -e "^  bgexec $cmd\$" || true)
  [[ -z $others ]] || fail "bgexec $cmd --zz: another command's usage: $others"
  (($(wc -l <"$E2E_DIR/err") <= 8)) || fail "bgexec $cmd --zz: $(wc -l <"$E2E_DIR/err") lines"
  grep -qx "(bgexec $cmd --help: every command, what it does, and the exit codes)" "$E2E_DIR/err" \
    || fail "bgexec $cmd --zz: $(cat "$E2E_DIR/err")"
done
expect_usage '--all is not an option of status' status 1 --all
grep -qx '  bgexec status ID' "$E2E_DIR/err" || fail "status --all: $(cat "$E2E_DIR/err")"
# another command's option is refused, not ignored
expect_usage '--queue is not an option of status' status 1 --queue x
expect_usage '--wait is not an option of status' status 1 --wait
expect_usage '--from is not an option of status' status 1 --from abc
expect_usage '--time-zone is not an option of submit' submit noop --time-zone Europe/Paris
expect_usage '--no-overlap is not an option of submit' submit noop --no-overlap
# an option given twice is refused: one value would win unnoticed
expect_usage '--queue is given more than once' submit noop --queue a --queue b
expect_usage '--max-queued is given more than once' configure-queue q --max-queued none --max-queued 5
expect_usage '--from is given more than once' tail 1 --from 1 --from 2
# ... and a switch given twice, as a value is (--json --json was taken)
expect_usage 'bgexec jobs: --json is given more than once' jobs --json --json
expect_usage '--wait is given more than once' submit noop --wait --wait
expect_usage '--follow is given more than once' run-schedule n --follow --follow
expect_usage '--all is given more than once' workers --all --all
expect_usage '--no-overlap is given more than once' schedule s '0 0 * * *' noop --no-overlap --no-overlap
expect_usage '--run-after is not an option of schedule' schedule s '0 0 * * *' noop --run-after +1h
expect_usage '--idempotency-key is not an option of schedule' schedule s '0 0 * * *' noop --idempotency-key k
expect_usage '--run-after is not an option of stop' stop 1 --run-after +1h
expect_usage '--follow is not an option of retry' retry 1 --follow
expect_usage '--max-attempts is not an option of resume' resume 1 --max-attempts 3
expect_usage 'pause-schedule takes NAME' pause-schedule
expect_usage 'resume-schedule takes NAME' resume-schedule a b
expect_usage 'run-schedule takes NAME' run-schedule
# Every usage line shows [--wait | --follow]: both at once is refused.
expect_usage '--wait and --follow cannot be used together' submit noop --wait --follow
expect_usage '--wait and --follow cannot be used together' run-schedule nightly --follow --wait
# JSON from the command line: nested past 512 levels it would overflow the
# stack when written out (it crashed with SIGSEGV); jsonb refuses a NUL.
python3 -c 'n = 100000; print("[" * n + "]" * n)' >"$E2E_DIR/deep.json"
expect_usage 'JSON nested deeper than 512 levels' resume 4 @"$E2E_DIR/deep.json"
expect_usage 'JSON nested deeper than 512 levels' submit noop @"$E2E_DIR/deep.json"
expect_usage 'JSON holds a NUL character' submit noop '{"a": "x\u0000y"}'
expect_usage 'duplicate key "a" in the JSON argument' submit noop '{"a": 1, "a": 2}'
expect_usage 'duplicate key "b" in the JSON argument at x' resume 4 '{"x": {"b": 1, "b": 2}}'
# The parser's reason, not the text echoed back; a directory is no file
# (it read as nothing: "invalid JSON:")
expect_usage "invalid JSON: number overflow parsing '1e400'" submit noop '{"a": 1e400}'
expect_usage "cannot read $E2E_DIR: it is a directory" submit noop @"$E2E_DIR"
expect_usage "cannot read $E2E_DIR/none.json: No such file or directory" submit noop @"$E2E_DIR/none.json"
# a read that fails part way is that failure, not "invalid JSON" of nothing
expect_usage "cannot read /proc/self/mem: Input/output error" submit noop @/proc/self/mem
expect_usage "@ needs a file name (@FILE), or @- for stdin" submit noop @
# A duration past what an interval literal holds names its option (exit 3, unnamed)
n70=$(printf '9%.0s' {1..70})
expect_usage "--timeout: interval field value out of range: \"$n70\"" submit noop --timeout "$n70"
expect_usage "--run-after: interval field value out of range" submit noop --run-after "+$n70"
expect_usage "--timeout: interval field value out of range" schedule s '0 0 * * *' noop --timeout "$n70"
# ... and past what an interval holds (2^63 microseconds), the text given:
# the server's error quoted "10000000000000000905969664 seconds"
expect_usage 'OLDER_THAN: interval field value out of range: "9999999999999999999999999"' purge 9999999999999999999999999
expect_usage '--timeout: interval field value out of range: "9223372036855"' submit noop --timeout 9223372036855
# version takes no arguments, as every other command refuses one too many
expect_usage 'version takes no arguments' version x
expect_usage 'version takes no arguments' version --db x
# Durations a worker's timers cannot hold, and a lease under a second
expect_usage '--poll: expected a duration of at most 3110400000 seconds' worker --poll 10000000000
expect_usage '--lease: expected a duration of at least 1 second' worker --lease 0.0000001
# --poll and --reconcile-interval: at least 1 ms (--poll 0.0000000001
# claimed in a busy loop).
expect_usage '--poll: expected a duration of at least 0.001 seconds, got "0.0000000001"' worker --poll 0.0000000001
BGEXEC_RECONCILE_INTERVAL=0.5ms expect_usage 'BGEXEC_RECONCILE_INTERVAL: expected a duration of at least 0.001 seconds' \
  worker
# The kill grace's conflict with the lease names where each came from (it
# named the config keys).
expect_usage '--kill-grace: 10 s must be less than a third of the lease (30 s, the default)' worker --kill-grace 10
BGEXEC_KILL_GRACE=3 expect_usage 'BGEXEC_KILL_GRACE: 3 s must be less than a third of the lease (6 s, from --lease)' \
  worker --lease 6
# One action named twice in one source: the last path won unnoticed.
expect_usage '--action: action "a" is given more than once' worker --action a=/bin/x --action a=/bin/y
BGEXEC_ACTIONS=a=/bin/x,a=/bin/y expect_usage 'BGEXEC_ACTIONS: action "a" is given more than once' worker
# A filter's empty queue or kind name: stop --queue '' matched nothing and
# exited 0.
expect_usage 'bgexec stop: --queue: expected a queue name, got ""' stop --queue ''
expect_usage 'bgexec retry: --kind: expected a kind name, got ""' retry --kind= --queue q
expect_usage 'bgexec jobs: --queue: expected a queue name, got ""' jobs --queue=

# -h is a help request only where an option may stand: not as an option's
# value, nor past "--" (those printed the usage and exited 0, submitting
# nothing, to a script that read the usage as the job's id).  Here they
# go on to the database, which is not there: exit 3.
for args in "submit noop --idempotency-key -h" "submit noop --queue -h" "submit -- -h"; do
  set +e; timeout 10 "$BGEXEC" $args >"$E2E_DIR/out" 2>"$E2E_DIR/err"; rc=$?; set -e
  ((rc == 3)) || fail "bgexec $args: exit $rc (expected 3, no database): $(cat "$E2E_DIR/err")"
  grep -q usage "$E2E_DIR/out" && fail "bgexec $args printed the usage"
done

# A database that cannot be reached: said so, without the connection's
# internal name ("client: connect: "), and where its address came from.
set +e; timeout 10 "$BGEXEC" status 1 >"$E2E_DIR/out" 2>"$E2E_DIR/err"; rc=$?; set -e
((rc == 3)) || fail "status, no database: exit $rc: $(cat "$E2E_DIR/err")"
grep -q '^bgexec status: cannot connect to the database: connection to server on socket "/nonexistent/.s.PGSQL.1" failed' \
  "$E2E_DIR/err" || fail "status, no database: $(cat "$E2E_DIR/err")"
grep -qx '  hint: the server is the one BGEXEC_DB names (--db overrides it)' "$E2E_DIR/err" \
  || fail "status, no database: no hint: $(cat "$E2E_DIR/err")"
set +e; timeout 10 "$BGEXEC" jobs --db "host=/nonexistent,/nonexistent2 port=1" 2>"$E2E_DIR/err"; set -e
grep -q '^bgexec jobs: cannot connect to the database: host /nonexistent port 1: connection to server' "$E2E_DIR/err" \
  || fail "jobs, no database: $(cat "$E2E_DIR/err")"
grep -qx '  hint: the server is the one --db names' "$E2E_DIR/err" || fail "jobs, no database: $(cat "$E2E_DIR/err")"
! grep -q 'client: \|connect: ' "$E2E_DIR/err" || fail "jobs, no database: $(cat "$E2E_DIR/err")"

# An unknown BGEXEC_LOG_LEVEL is refused by every command, naming the
# variable and the allowed values; any case of a known one is taken.
for cmd in worker "status 1" version; do
  # (timeout: a worker that took the value would run on, retrying its connection)
  set +e; BGEXEC_LOG_LEVEL=verbose timeout 10 "$BGEXEC" $cmd >/dev/null 2>"$E2E_DIR/err"; rc=$?; set -e
  ((rc == 2)) || fail "BGEXEC_LOG_LEVEL=verbose bgexec $cmd: exit $rc (expected 2)"
  grep -qF 'BGEXEC_LOG_LEVEL: expected debug, info, warn or error, got "verbose"' "$E2E_DIR/err" \
    || fail "BGEXEC_LOG_LEVEL=verbose bgexec $cmd: $(cat "$E2E_DIR/err")"
done
BGEXEC_LOG_LEVEL=WARN "$BGEXEC" version >/dev/null || fail "BGEXEC_LOG_LEVEL=WARN refused"
BGEXEC_LOG_LEVEL= "$BGEXEC" version >/dev/null || fail "an empty BGEXEC_LOG_LEVEL refused"

# A connection string libpq cannot parse is a usage error naming its
# source, for the worker (which retried it for ever as "database
# unavailable") and the clients; a database that is only down is retried.
expect_usage '--db: invalid connection string: invalid connection option "bogus"' worker --db "bogus=1"
BGEXEC_DB="bogus=1" expect_usage 'BGEXEC_DB: invalid connection string: invalid connection option "bogus"' worker
expect_usage '--db: invalid connection string: invalid connection option "bogus"' status 1 --db "bogus=1"
echo '{"t": "r"}' >"$E2E_DIR/tokens.json"
expect_usage '--db: invalid connection string' serve --tokens "$E2E_DIR/tokens.json" --db "bogus=1"
expect_usage 'unexpected argument "extra"' serve --tokens "$E2E_DIR/tokens.json" extra
# libpq's reason may quote a malformed URI whole: its password is shown as
# *** (it was echoed, from --db, BGEXEC_DB or the config file alike).
printf '{"db": "postgresql://bgexec:S3cretPw@[::1/app"}' >"$E2E_DIR/db.json"
uri_reason='invalid connection string: end of string reached when looking for matching "]" in IPv6 host address in URI: "postgresql://bgexec:***@[::1/app"'
for how in "--db" BGEXEC_DB config "status --db" serve; do
  case $how in
    --db) expect_usage "--db: $uri_reason" worker --db 'postgresql://bgexec:S3cretPw@[::1/app' ;;
    BGEXEC_DB) BGEXEC_DB='postgresql://bgexec:S3cretPw@[::1/app' expect_usage "BGEXEC_DB: $uri_reason" worker ;;
    config) BGEXEC_DB= expect_usage "config file $E2E_DIR/db.json: key \"db\": $uri_reason" worker --config "$E2E_DIR/db.json" ;;
    "status --db") expect_usage "--db: $uri_reason" status 1 --db 'postgresql://bgexec:S3cretPw@[::1/app' ;;
    serve) expect_usage "--db: $uri_reason" serve --tokens "$E2E_DIR/tokens.json" --db 'postgresql://bgexec:S3cretPw@[::1/app' ;;
  esac
  ! grep -q S3cretPw "$E2E_DIR/err" || fail "$how: the password is shown: $(cat "$E2E_DIR/err")"
done
expect_usage '--db: invalid connection string: invalid percent-encoded token: "***"' worker --db 'postgresql://u:S3c%zzPw@h/db'
! grep -q S3c "$E2E_DIR/err" || fail "a %-escaped password is shown: $(cat "$E2E_DIR/err")"
# A key=value password with a blank, unquoted: libpq cannot split the
# string and quotes the token after the blank, a piece of the password
# (`missing "=" after "S3cretPw"`).  Where the password ends is unknown,
# so every token after password= that libpq quotes reads "***"; one
# before it is named.
kv_hint='(*** is a token after password=; a value with a space is quoted: password='"'a b'"')'
expect_usage "--db: invalid connection string: missing \"=\" after \"***\" in connection info string $kv_hint" \
  worker --db 'host=/tmp password=abc S3cretPw dbname=x'
! grep -q S3c "$E2E_DIR/err" || fail "a password's piece is shown: $(cat "$E2E_DIR/err")"
BGEXEC_DB='password=abc S3cretPw=x' expect_usage \
  "BGEXEC_DB: invalid connection string: invalid connection option \"***\" $kv_hint" status 1
! grep -q S3c "$E2E_DIR/err" || fail "a password's piece is shown: $(cat "$E2E_DIR/err")"
expect_usage '--db: invalid connection string: missing "=" after "***"' \
  serve --tokens "$E2E_DIR/tokens.json" --db "sslpassword = 'q' S3cretPw"
! grep -q S3c "$E2E_DIR/err" || fail "a password's piece is shown: $(cat "$E2E_DIR/err")"
expect_usage '--db: invalid connection string: invalid connection option "hots"' worker --db 'hots=h password=abc S3cretPw'
! grep -q S3c "$E2E_DIR/err" || fail "a password's piece is shown: $(cat "$E2E_DIR/err")"
# An open-file limit too low for the event loop's own descriptors: the
# signal set's pipe fails (EMFILE), at 7 for the worker and the gateway.
# One error and a documented exit (1; 2 for a gateway that cannot listen),
# where the uncaught exception aborted (exit 134).
for n in 5 6 7; do
  for cmd in worker serve; do
    args=(worker)
    [[ $cmd == serve ]] && args=(serve --tokens "$E2E_DIR/tokens.json" --listen 127.0.0.1:0)
    set +e; (ulimit -n "$n"; exec timeout 10 "$BGEXEC" "${args[@]}") >"$E2E_DIR/out" 2>"$E2E_DIR/err"; rc=$?; set -e
    ((rc == 1 || rc == 2)) || fail "$cmd at an open-file limit of $n: exit $rc: $(cat "$E2E_DIR/err")"
    ! grep -q "terminate called" "$E2E_DIR/err" || fail "$cmd at an open-file limit of $n: $(cat "$E2E_DIR/err")"
  done
done
grep -q 'Too many open files' "$E2E_DIR/err" || fail "serve at an open-file limit of 7: $(cat "$E2E_DIR/err")"
# every command's --help prints its usage
"$BGEXEC" version --help | grep -qx 'usage: bgexec version' || fail "version --help"
# the worker's too, as every other command's: "usage:", not "Usage:"
"$BGEXEC" worker --help | head -1 | grep -q '^usage: bgexec worker ' || fail "worker --help: $("$BGEXEC" worker --help | head -1)"
# --status: a status the job table does not have is a usage error naming
# the seven, for jobs (the server's enum refused it, exit 3) as for stop and retry
statuses='(a job is queued, running, suspended, completed, failed, cancelled or timed_out)'
expect_usage "--status: unknown status \"done\" $statuses" jobs --status done
expect_usage "--status: unknown status \"done\" $statuses" jobs --status failed,done
expect_usage "--status: unknown status \"done\" $statuses" stop --status done
expect_usage "--status: unknown status \"done\" $statuses" retry --queue q --status failed,done
expect_usage '--status: expected a status, got "failed,"' jobs --status failed,
expect_usage '--status: expected a status, got "failed,,cancelled"' jobs --status failed,,cancelled
# (a status stop or retry does not act on stays that error)
expect_usage '--status: retry acts on failed, cancelled or timed_out jobs, got "completed"' retry --status completed
# An unknown option close to one the command takes (2 edits at most) is named.
expect_usage 'bgexec submit: unknown option --priorty (did you mean --priority?)' submit noop --priorty 3
expect_usage 'bgexec tail: unknown option --form (did you mean --from?)' tail 4 --form 3
expect_usage 'bgexec jobs: unknown option --limt (did you mean --limit?)' jobs --limt 3
expect_usage 'bgexec run-schedule: unknown option --wiat (did you mean --wait?)' run-schedule n --wiat
expect_usage 'bgexec submit: unknown option --jsn (did you mean --json?)' submit noop --jsn
# of the command's own options only, and not for a name that is no misspelling
expect_usage 'bgexec status: unknown option --limt' status 4 --limt 3
! grep -q 'did you mean' "$E2E_DIR/err" || fail "status --limt: $(cat "$E2E_DIR/err")"
expect_usage 'bgexec jobs: unknown option --zz' jobs --zz
! grep -q 'did you mean' "$E2E_DIR/err" || fail "jobs --zz: $(cat "$E2E_DIR/err")"
grep -qx '  bgexec jobs .*' "$E2E_DIR/err" || fail "jobs --zz: no usage: $(cat "$E2E_DIR/err")"
# A '/' written raw in a URI's password: libpq ends the user info at the
# '/', and reads the password's first piece as the port, which the
# connect's message quotes (`invalid integer value "S3c"`).  Those pieces
# read *** in a client's, bench's, worker's and gateway's message, with the
# escape named.
misread='postgresql://u:S3c/retPw@h/db'
uri_hint="a '/' or '@' in a password is written %2F or %40"
for cmd in status bench worker serve; do
  case $cmd in
    status) args=(status 1 --db "$misread") ;;
    bench) args=(bench --db "$misread") ;;
    worker) args=(worker --db "$misread") ;;
    serve) args=(serve --tokens "$E2E_DIR/tokens.json" --listen 127.0.0.1:0 --db "$misread") ;;
  esac
  set +e; timeout 3 "$BGEXEC" "${args[@]}" >"$E2E_DIR/out" 2>"$E2E_DIR/err"; set -e
  # (the worker's and the gateway's log lines escape the quotes)
  grep -qE 'invalid integer value \\?"\*\*\*\\?" for connection option' "$E2E_DIR/err" \
    || fail "$cmd, a misread URI password: $(cat "$E2E_DIR/err")"
  grep -qF "$uri_hint" "$E2E_DIR/err" || fail "$cmd, a misread URI password: no hint: $(cat "$E2E_DIR/err")"
  ! grep -q S3c "$E2E_DIR/err" || fail "$cmd: a password's piece is shown: $(cat "$E2E_DIR/err")"
done
# A worker, serve or bench flag given twice is refused, as a client's
# option is, in either spelling: the last value won unnoticed (--lease 5
# --lease 60 ran with 60).  --queue and --action add up, as documented.
expect_usage 'bgexec worker: --lease is given more than once' worker --lease 5 --lease 60
expect_usage '--concurrency is given more than once' worker --concurrency 2 --concurrency=20
expect_usage '--id is given more than once' worker --id=a --id b
expect_usage '--allow-run is given more than once' worker --allow-run --allow-run=false
expect_usage '--grace is given more than once' worker --grace 0 --grace=600
expect_usage '--config is given more than once' worker --config "$E2E_DIR/db.json" --config "$E2E_DIR/db.json"
expect_usage '--lease: expected a duration of at least 1 second, got "0"' worker --queue a --queue=b --action x=/bin/x --action=y=/bin/y --lease 0
expect_usage 'bgexec serve: --pool is given more than once' serve --tokens "$E2E_DIR/tokens.json" --listen 127.0.0.1:0 --pool 5 --pool=50
for bad in '[::1:8080' '[]:8080' '[127.0.0.1]:8080'; do
  expect_usage "--listen must be HOST:PORT, an IPv6 host in brackets ([::1]:8080), got \"$bad\"" serve --tokens "$E2E_DIR/tokens.json" --listen "$bad"
done
expect_usage 'bgexec bench: --jobs is given more than once' bench --jobs 5 --jobs=50
expect_usage 'bgexec bench: --keep is given more than once' bench --keep --keep
expect_usage 'bgexec bench: --scaling is given more than once' bench --scaling --skip-rss --scaling
# A config file that is not JSON names the parser's reason and place, as
# the CLI does for a JSON argument (it said "not valid JSON" alone).
printf '{"lease": 20,\n "grace": 5,\n}\n' >"$E2E_DIR/comma.json"
expect_usage "config file $E2E_DIR/comma.json: not valid JSON: parse error at line 3, column 1: syntax error while parsing object key - unexpected '}'; expected string literal" worker --config "$E2E_DIR/comma.json"
echo '{"lease": 1e400}' >"$E2E_DIR/huge.json"
expect_usage "config file $E2E_DIR/huge.json: not valid JSON: number overflow parsing '1e400'" worker --config "$E2E_DIR/huge.json"
# SIGINT while the worker still retries its connection: exit 0, and the
# stop is logged (it exited silently).  A --secrets-dir that is not there
# is warned about at start (a job using it failed later, with no sign why),
# as is an action that cannot be started (a typo in its path, a script not
# executable, a name not on PATH); one that can is not.
printf '#!/bin/sh\n' >"$E2E_DIR/not-exec"
"$BGEXEC" worker --secrets-dir /nonexistent/secrets --action typo=/nonexistent/resize \
  --action noexec="$E2E_DIR/not-exec" --action nopath=no-such-command-here --action fine=true \
  --action dir=/tmp >"$E2E_DIR/w.log" 2>&1 &
pid=$!; E2E_PIDS+=("$pid")
wait_for 10 grep -q 'database unavailable, retrying' "$E2E_DIR/w.log" || fail "worker did not retry: $(cat "$E2E_DIR/w.log")"
kill -INT "$pid"
set +e; wait "$pid"; rc=$?; set -e
((rc == 0)) || fail "worker stopped while connecting: exit $rc"
grep -q 'msg="worker stopped"' "$E2E_DIR/w.log" || fail "no \"worker stopped\" line: $(cat "$E2E_DIR/w.log")"
grep 'level=warn msg="secrets dir unavailable' "$E2E_DIR/w.log" | grep -qF 'secrets_dir=/nonexistent/secrets' \
  || fail "no warning for a missing secrets dir: $(cat "$E2E_DIR/w.log")"
for a in "typo path=/nonexistent/resize error=\"No such file or directory\"" \
  "noexec path=$E2E_DIR/not-exec error=\"Permission denied\"" \
  "nopath path=no-such-command-here error=\"No such file or directory\"" \
  "dir path=/tmp error=\"not a regular file\""; do
  grep 'level=warn msg="action cannot be started: its jobs fail until it can"' "$E2E_DIR/w.log" | grep -qF "action=$a" \
    || fail "no warning for action ${a%% *}: $(cat "$E2E_DIR/w.log")"
done
! grep -q 'action=fine' "$E2E_DIR/w.log" || fail "a warning for an action that runs: $(cat "$E2E_DIR/w.log")"

# Both help texts show resume's @FILE form, as the README does.
"$BGEXEC" --help | grep -qF 'resume ID [JSON|@FILE]' || fail "bgexec --help: resume ID [JSON|@FILE]"
"$BGEXEC" resume --help | grep -qF 'resume ID [JSON|@FILE]' || fail "bgexec resume --help: resume ID [JSON|@FILE]"
# bgexec --help names every client command (reschedule was missing from it)
# and the options of each that its own --help gives (--status S[,S...])
for cmd in submit status jobs tail stop resume retry reschedule queues pause-queue resume-queue configure-queue \
    workers schedule unschedule schedules pause-schedule resume-schedule run-schedule purge; do
  "$BGEXEC" --help | grep -qE "^  $cmd( |\$)" || fail "bgexec --help does not name $cmd"
done
for cmd in jobs purge; do
  "$BGEXEC" --help | grep -E "^  $cmd " | grep -qF -- '--status S[,S...]' \
    || fail "bgexec --help: $cmd without --status S[,S...]: $("$BGEXEC" --help | grep -E "^  $cmd ")"
done
ok

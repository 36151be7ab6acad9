#!/usr/bin/env bash
# A fenced write in flight when the database goes away gives up once the
# job's lease is spent: the worker abandons the job and, on SIGTERM with the
# database still down, drains and exits instead of retrying for ever (the
# mutation run of the daemon found no test of the bound).
source "$(dirname "$0")/lib.sh"
e2e_cluster 57934
start_worker w1 --allow-run --lease 10 --grace 1
# The step ends once the database is down, so its finish is the write in
# flight (a fixed sleep could end first on a slow machine, and the job
# completed).
go=$E2E_DIR/go
id=$("$BGEXEC" submit workflow "{\"steps\": [{\"id\": \"s\", \"run\": [\"sh\", \"-c\", \"until [ -e $go ]; do sleep 0.1; done\"]}]}") \
  || fail submit
wait_status "$id" running 20
cluster_stop "$E2E_DIR/pg" >/dev/null
touch "$go"
wait_for 20 grep -q 'msg="abandoning job"' "$E2E_DIR/w1.log" || fail "the job was not abandoned"
kill -TERM "$PID_w1"
wait_for 10 gone "$PID_w1" || fail "the worker did not exit within 10 s of SIGTERM (a write still retrying?)"
ok "the write gave up with the lease; the worker drained and exited with the database down"

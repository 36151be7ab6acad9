#!/usr/bin/env bash
# A JSON argument read from @FILE or @- stops at 256 MiB (what one jsonb
# holds): past it, a usage error naming the file, at once, never a read of
# the whole (@/dev/urandom grew until the kernel killed it); an allocation
# failure while reading says so, never cuts the text short.  No cluster:
# each is refused before a connection.
source "$(dirname "$0")/lib.sh"
export PGHOST=/nonexistent PGPORT=1 BGEXEC_DB="host=/nonexistent port=1 connect_timeout=1"

# expect_refused NEEDLE VMEM_KB ARGS... (stdin from the caller): exit 2 and
# NEEDLE on stderr, under a cap on the address space (so an unbounded read
# fails here rather than on the machine).
expect_refused() {
  local needle=$1 vmem=$2 rc; shift 2
  set +e; (ulimit -v "$vmem"; exec timeout 60 "$BGEXEC" "$@") >"$E2E_DIR/out" 2>"$E2E_DIR/err"; rc=$?; set -e
  ((rc == 2)) || fail "bgexec $*: exit $rc (expected 2): $(head -c 300 "$E2E_DIR/err")"
  grep -qxF -- "bgexec ${1}: $needle" "$E2E_DIR/err" || fail "bgexec $*: expected \"$needle\", got: $(head -c 300 "$E2E_DIR/err")"
}

# A stream without end: read up to the limit, then refused.
expect_refused 'cannot read /dev/urandom: larger than 256 MiB' 1000000 submit noop @/dev/urandom </dev/null
# A file past the limit (sparse: nothing on disk) is refused by its size,
# before a read; stdin is named -.
truncate -s $((256 * 1024 * 1024 + 1)) "$E2E_DIR/big.json"
expect_refused "cannot read $E2E_DIR/big.json: larger than 256 MiB" 200000 submit noop "@$E2E_DIR/big.json" </dev/null
# (a process substitution: the writer is cut off, a pipeline would fail)
expect_refused 'cannot read -: larger than 256 MiB' 1000000 resume 4 @- < <(head -c $((256 * 1024 * 1024 + 1)) /dev/zero)
# Exactly 256 MiB is read (and then found to be no JSON: its NULs).
truncate -s $((256 * 1024 * 1024)) "$E2E_DIR/big.json"
expect_refused 'invalid JSON: a NUL byte at offset 0 (write \u0000 in a string)' 1000000 schedule n '@daily' noop "@$E2E_DIR/big.json" </dev/null
rm -f "$E2E_DIR/big.json"
# Memory running out while reading a valid document (200 MB within a
# 300 MB address space): a read error, not the JSON error of a cut text.
expect_refused 'cannot read -: out of memory' 300000 submit noop @- \
  < <(printf '["'; head -c 200000000 /dev/zero | tr '\0' x; printf '"]')
ok

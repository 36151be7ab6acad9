#!/usr/bin/env bash
# `make test`: installs missing packages, builds the extension and the daemon,
# starts a throwaway cluster, runs every suite (pg_regress, isolation, daemon
# unit tests, end-to-end), stops what it started, and exits non-zero on any
# failure.  Suites can be picked with BGEXEC_SUITES="regress isolation unit e2e".
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

scripts/deps.sh || exit 1

SUITES=${BGEXEC_SUITES:-"regress isolation unit e2e http"}
# Without the daemon sources (an extension-only checkout) skip its suites.
[[ -f daemon/CMakeLists.txt ]] || SUITES=${SUITES//unit/}
[[ -f daemon/CMakeLists.txt ]] || SUITES=${SUITES//e2e/}
[[ -f daemon/CMakeLists.txt ]] || SUITES=${SUITES//http/}
PORT=${BGEXEC_TEST_PORT:-55432}
source scripts/lib/cluster.sh
scratch_dir test

passed=0 failed=0 failures=()
result() {  # result NAME RC
  if [[ $2 -eq 0 ]]; then passed=$((passed + 1)); echo "== suite $1: ok"
  else failed=$((failed + 1)); failures+=("$1"); echo "== suite $1: FAILED"; fi
}

echo "== build and install the extension and the daemon"
make -s install >/dev/null || { echo "build failed"; exit 1; }
if [[ " $SUITES " == *" unit "* ]]; then
  make -s daemon >/dev/null || { echo "build of the unit tests failed"; exit 1; }
fi

if [[ " $SUITES " == *" regress "* || " $SUITES " == *" isolation "* ]]; then
  cluster_start "$WORK/cluster" "$PORT" "fsync = off" "bgexec.watchdog_interval = '1h'" || exit 1
  rm -rf build/regress build/isolation && mkdir -p build/regress build/isolation
  if [[ " $SUITES " == *" regress "* ]]; then
    echo "== pg_regress"
    make installcheck ISOLATION= 2>&1 | tail -n 40; rc=${PIPESTATUS[0]}
    [[ $rc -ne 0 && -f build/regress/regression.diffs ]] && cat build/regress/regression.diffs
    result regress "$rc"
  fi
  if [[ " $SUITES " == *" isolation "* ]]; then
    echo "== isolation"
    make installcheck REGRESS= 2>&1 | tail -n 40; rc=${PIPESTATUS[0]}
    [[ $rc -ne 0 && -f build/isolation/regression.diffs ]] && cat build/isolation/regression.diffs
    result isolation "$rc"
  fi
  cluster_stop "$WORK/cluster"
fi

if [[ " $SUITES " == *" unit "* ]]; then
  echo "== daemon unit tests"
  ctest --test-dir daemon/build --output-on-failure 2>&1 | tail -n 30; result unit "${PIPESTATUS[0]}"
fi

if [[ " $SUITES " == *" e2e "* ]]; then
  for t in test/e2e/[0-9]*.sh; do
    [[ -e $t ]] || continue
    echo "== e2e $(basename "$t")"
    # The status first: expanding $(basename …) in result's arguments
    # would reset $? to 0 before it is read, and every failure passed.
    timeout 600 bash "$t"; rc=$?
    result "e2e/$(basename "$t" .sh)" "$rc"
  done
fi

if [[ " $SUITES " == *" http "* ]]; then
  echo "== http (bgexec serve)"
  timeout 900 test/http/run.sh 2>&1 | tail -n 60; result http "${PIPESTATUS[0]}"
fi

echo
echo "suites: ${passed} passed, ${failed} failed${failures:+ (${failures[*]})}"
echo "${passed} passed, ${failed} failed"
[[ $failed -eq 0 ]]

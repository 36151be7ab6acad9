#!/usr/bin/env bash
# `make test-assert`: the extension's suites against an assert-enabled
# PostgreSQL 15 (--enable-cassert), which checks what a release server takes
# on trust: an Assert() of the server's own, memory contexts, SPI and
# snapshot use, lock and buffer pins left at commit.  Debian's server is a
# release build, so `make test` cannot see these.
#
# Builds the server once from Debian's source package of postgresql-15
# (apt-get source; about 25 MB and 10 minutes on 2 cores) into
# build/pg-assert, builds the extension against it in a copy of the tree
# (build/assert-src: objects built against one server's headers are not
# reused for another), then runs pg_regress, the isolation specs and the e2e
# tests named in BGEXEC_ASSERT_E2E (default: those that exercise the
# watchdog's background worker, the wakes, sql step sessions and restarts)
# on clusters of that server.  A failed Assert() kills a backend: the
# suites see the crash, and the cluster logs are searched for TRAP lines.
# Not part of
# `make test`: it needs Debian's source packages and the build time.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

scripts/deps.sh || exit 1
make -s daemon-bin >/dev/null || { echo "build of the daemon failed"; exit 1; }

PREFIX=$ROOT/build/pg-assert
SRC=$ROOT/build/pg-assert-src
E2E=${BGEXEC_ASSERT_E2E:-"02 04 09 19 21 22 28 29 37 52 80 89 90 92 99 101"}

if [[ ! -x $PREFIX/bin/postgres ]]; then
  echo "== build PostgreSQL 15 with --enable-cassert into build/pg-assert"
  if [[ $(id -u) -eq 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zlib1g-dev >/dev/null 2>&1 || { echo "apt-get install zlib1g-dev failed"; exit 1; }
  fi
  rm -rf "$SRC" && mkdir -p "$SRC"
  # apt-get source needs deb-src entries: a private list of Debian's own,
  # used for this download only (the system's lists are left as they are).
  lists=$SRC/apt && mkdir -p "$lists/lists/partial" "$lists/archives/partial"
  cat >"$lists/sources.list" <<'EOF'
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian bookworm-updates main
deb-src http://deb.debian.org/debian-security bookworm-security main
EOF
  apt_src=(-o Dir::Etc::SourceList="$lists/sources.list" -o Dir::Etc::SourceParts=/dev/null
           -o Dir::State::Lists="$lists/lists" -o APT::Sandbox::User=root)
  apt-get "${apt_src[@]}" update -qq >/dev/null 2>&1 || { echo "apt-get update (deb-src) failed"; exit 1; }
  # The newest version first; a mirror may list one whose files it lacks.
  got=0
  for v in $(apt-cache "${apt_src[@]}" showsrc postgresql-15 | sed -n 's/^Version: //p' | sort -rV | uniq); do
    (cd "$SRC" && apt-get "${apt_src[@]}" source -qq --download-only "postgresql-15=$v" >/dev/null 2>&1) \
      && { got=1; echo "   postgresql-15 $v"; break; }
  done
  [[ $got -eq 1 ]] || { echo "no source package of postgresql-15 could be downloaded"; exit 1; }
  tar -C "$SRC" -xjf "$SRC"/postgresql-15_*.orig.tar.bz2 || exit 1
  # As a top-level make: PostgreSQL generates its headers only at
  # MAKELEVEL 0, and `make test-assert` is itself a make.
  (cd "$SRC"/postgresql-15.* && unset MAKELEVEL MAKEFLAGS MFLAGS &&
    ./configure -q --prefix="$PREFIX" --enable-cassert --enable-debug --without-readline --without-icu \
      --with-system-tzdata=/usr/share/zoneinfo CFLAGS="-O1 -g" >"$SRC/configure.log" 2>&1 &&
    make -s -j"$(nproc)" world-bin >"$SRC/build.log" 2>&1 &&
    make -s install-world-bin >>"$SRC/build.log" 2>&1 &&
    make -s -C src/test/isolation install >>"$SRC/build.log" 2>&1) \
    || { echo "PostgreSQL build failed: see $SRC/*.log"; exit 1; }
fi
PG_CONFIG=$PREFIX/bin/pg_config

echo "== build the extension against it (build/assert-src)"
COPY=$ROOT/build/assert-src
rm -rf "$COPY" && mkdir -p "$COPY"
cp -a Makefile bgexec.control extension include sql "$COPY"/
mkdir -p "$COPY/test" && cp -a test/sql test/expected test/isolation "$COPY/test"/
(cd "$COPY" && make -s PG_CONFIG="$PG_CONFIG" >/dev/null && make -s PG_CONFIG="$PG_CONFIG" -o install-daemon install >/dev/null) \
  || { echo "extension build against the assert-enabled server failed"; exit 1; }

export PGBIN=$PREFIX/bin
source scripts/lib/cluster.sh
scratch_dir assert
PORT=${BGEXEC_TEST_PORT:-55433}
passed=0 failed=0 failures=()
result() {  # result NAME RC
  if [[ $2 -eq 0 ]]; then passed=$((passed + 1)); echo "== suite $1: ok"
  else failed=$((failed + 1)); failures+=("$1"); echo "== suite $1: FAILED"; fi
}
traps() {  # traps LOG...: the failed Assert()s and crashed backends in the logs
  grep -hE "TRAP:|was terminated by signal" "$@" 2>/dev/null
}

cluster_start "$WORK/cluster" "$PORT" "fsync = off" "bgexec.watchdog_interval = '1h'" || exit 1
(
  cd "$COPY" && export PGHOST=$WORK/cluster PGPORT=$PORT PGUSER=postgres
  mkdir -p build/regress build/isolation
  echo "== pg_regress (assert-enabled server)"
  make PG_CONFIG="$PG_CONFIG" installcheck ISOLATION= 2>&1 | tail -n 40; rc=${PIPESTATUS[0]}
  [[ $rc -ne 0 && -f build/regress/regression.diffs ]] && cat build/regress/regression.diffs
  exit "$rc"
); result assert/regress $?
(
  cd "$COPY" && export PGHOST=$WORK/cluster PGPORT=$PORT PGUSER=postgres
  echo "== isolation (assert-enabled server)"
  make PG_CONFIG="$PG_CONFIG" installcheck REGRESS= 2>&1 | tail -n 40; rc=${PIPESTATUS[0]}
  [[ $rc -ne 0 && -f build/isolation/regression.diffs ]] && cat build/isolation/regression.diffs
  exit "$rc"
); result assert/isolation $?
cluster_stop "$WORK/cluster"
if traps "$WORK/cluster/postgres.log"; then result assert/traps 1; else result assert/traps 0; fi

for n in $E2E; do
  for t in test/e2e/"$n"-*.sh; do
    [[ -e $t ]] || continue
    echo "== e2e $(basename "$t") (assert-enabled server)"
    timeout 600 bash "$t"; rc=$?
    result "assert/e2e/$(basename "$t" .sh)" "$rc"
  done
done

echo
echo "suites: ${passed} passed, ${failed} failed${failures:+ (${failures[*]})}"
[[ $failed -eq 0 ]]

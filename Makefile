# bgexec — PGXS build of the extension, plus wrapper targets for the daemon,
# the test suites and the demo.  `make test` and `make demo` are the two
# commands a fresh Debian 12 machine needs (they install missing packages).

EXTENSION   = bgexec
MODULE_big  = bgexec
OBJS        = $(patsubst %.c,%.o,$(sort $(wildcard extension/*.c)))
DATA        = $(sort $(wildcard sql/bgexec--*.sql))
PG_CPPFLAGS = -I$(CURDIR)/include
PG_CFLAGS   = -Wall -Werror -Wno-declaration-after-statement

# pg_regress suites, in order (one file per API area).
REGRESS      = setup lifecycle idempotency fencing retries stop suspend \
               reconcile step_session unclaim snooze wake await_xmin schedules deadlines validation caps security pgtemp events objects purge counts edges invariants boundaries plans listing retry_batch future priorities many_queues caps_running sqltime queue_defaults reschedule unique_key upgrade
REGRESS_OPTS = --inputdir=test --outputdir=build/regress
ISOLATION      = $(patsubst test/isolation/specs/%.spec,%,$(sort $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=build/isolation

PG_CONFIG ?= $(firstword $(wildcard /usr/lib/postgresql/15/bin/pg_config) pg_config)
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
endif

.PHONY: deps daemon daemon-bin install-daemon test test-assert test-tsan demo bench

# `make install` installs the extension (PGXS) and the daemon binary
# (bin/bgexec under DAEMON_PREFIX, default /usr/local), with the systemd
# unit, the example config and the README in share/doc/bgexec.
DAEMON_PREFIX ?= /usr/local
DAEMON_DOCS    = README.md daemon/bgexec.example.json
install: install-daemon
install-daemon: daemon-bin
	cmake --install daemon/build --prefix $(DAEMON_PREFIX) >/dev/null
	install -d $(DESTDIR)$(DAEMON_PREFIX)/share/doc/bgexec
	install -m 0644 $(DAEMON_DOCS) $(DESTDIR)$(DAEMON_PREFIX)/share/doc/bgexec/
	# the unit's paths name the prefix it was installed under
	sed 's|/usr/local/|$(DAEMON_PREFIX)/|g' daemon/bgexec.service >$(DESTDIR)$(DAEMON_PREFIX)/share/doc/bgexec/bgexec.service
	chmod 0644 $(DESTDIR)$(DAEMON_PREFIX)/share/doc/bgexec/bgexec.service

# Installs the Debian packages the build, tests and demo need (no-op when present).
deps:
	scripts/deps.sh

# Builds the C++ daemon (CMake project in daemon/) and its unit tests.
daemon:
	scripts/build-daemon.sh

# Builds the bgexec binary alone (what install needs; the unit tests take
# minutes more to compile).
daemon-bin:
	TARGET=bgexec scripts/build-daemon.sh

# Every suite against a throwaway cluster; non-zero exit on any failure.
test:
	scripts/test.sh

# The extension's suites against an assert-enabled PostgreSQL 15, built once
# from Debian's source package into build/pg-assert (not part of `test`).
test-assert:
	scripts/test-assert.sh

# The daemon under ThreadSanitizer: its unit tests and the e2e tests that
# drive its threads, built into build/tsan (not part of `test`).
test-tsan:
	scripts/test-tsan.sh

# A workflow end to end on a throwaway cluster with two workers.
demo:
	scripts/demo.sh

# The benchmark on a throwaway cluster; results in bench/.
bench:
	scripts/bench.sh

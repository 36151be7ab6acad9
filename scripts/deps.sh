#!/usr/bin/env bash
# Installs the Debian 12 packages bgexec needs, only those missing.
# Runs as root (CI, `make test`, `make demo`); as another user it only reports.
# --build: only what building, installing and running needs (a production
# host), not the test suites' tools.
set -euo pipefail

PKGS=(
  build-essential make cmake pkg-config g++
  postgresql-15 postgresql-server-dev-15 postgresql-client-15 libpq-dev
  libboost1.81-dev nlohmann-json3-dev
)
if [[ ${1:-} != --build ]]; then
  PKGS+=(
    libgtest-dev googletest
    procps psmisc iproute2 curl jq python3
    chromium
    pgbouncer
  )
  # Node.js runs the HTTP tests (eventsource, playwright-core); any install
  # with npm will do (this machine kind ships NodeSource's), else Debian's.
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    PKGS+=(nodejs npm)
  fi
fi
PKGS+=(${BGEXEC_EXTRA_PKGS:-})

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "deps: missing packages: ${missing[*]} (run as root or install them)" >&2
  exit 1
fi

echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's postgresql-common may start the packaged "main" cluster on 5432,
# and the pgbouncer package its service on 6432; bgexec's scripts never use
# them and never stop them (test/e2e/11-pooler.sh runs its own pgbouncer).

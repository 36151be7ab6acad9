#!/usr/bin/env bash
# The throwaway cluster of bgexec_pg_tests (CTest fixture pg_cluster, see
# CMakeLists.txt): `start DIR` or `stop DIR`.  Its only socket is the Unix
# socket in DIR (no TCP port: it runs beside any other cluster), and it
# preloads nothing (it needs no installed bgexec).
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib/cluster.sh"
dir=$2
case $1 in
  start)
    cluster_stop "$dir"  # one that a killed run left
    rm -rf "$dir"
    cluster_start "$dir" 5432 "listen_addresses = ''" "shared_preload_libraries = ''" "fsync = off"
    ;;
  stop)
    cluster_stop "$dir"
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac

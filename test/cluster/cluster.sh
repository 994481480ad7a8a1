#!/usr/bin/env bash
# A test cluster that outlives the command that starts it, for working with kubectl or helm by hand:
#   test/cluster/cluster.sh up [dir]     start it; prints `export KUBECONFIG=<dir>/kubeconfig` once
#                                        its nodes are Ready (eval the output to use it)
#   test/cluster/cluster.sh down [dir]   stop it and remove dir
# dir defaults to /tmp/berth-test-cluster; it holds the kubeconfig, the certificates, etcd's data
# and one log per process (run.log is the runner's own).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
START_TIMEOUT=${START_TIMEOUT:-600} # seconds; a first run builds the binaries

usage() { echo "usage: $0 up|down [dir]" >&2; exit 2; }

up() {
  local dir=$1
  if [ -e "$dir" ]; then
    echo "$dir already exists: run '$0 down $dir' first" >&2
    exit 1
  fi
  mkdir -p "$dir"
  # setsid: the cluster must survive the shell that started it (its hangup and its Ctrl-C). The
  # launcher, not being a group leader, keeps its pid and leads the new process group.
  (cd "$ROOT" && exec setsid npx tsx test/cluster/run.ts "$dir" >"$dir/run.log" 2>&1 </dev/null) &
  local pid=$! # npx's; the runner writes its own to run.pid for `down`
  local deadline=$((SECONDS + START_TIMEOUT))
  until [ -e "$dir/env" ]; do
    if ! kill -0 "$pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
      kill -TERM -- "-$pid" 2>/dev/null || true # the whole group setsid made, cluster included
      echo "the test cluster did not start; end of $dir/run.log (run '$0 down $dir' to remove it):" >&2
      tail -n 40 "$dir/run.log" >&2
      exit 1
    fi
    sleep 0.2
  done
  cat "$dir/env"
}

down() {
  local dir=$1
  # run.log marks a directory that `up` made, and so may be removed.
  if [ ! -f "$dir/run.log" ]; then
    echo "no test cluster in $dir" >&2
    exit 1
  fi
  # The runner stops every process of the cluster on SIGTERM, and its launchers exit with it.
  local pid
  if pid=$(cat "$dir/run.pid" 2>/dev/null) && kill -TERM "$pid" 2>/dev/null; then
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  rm -rf "$dir"
}

[ $# -ge 1 ] && [ $# -le 2 ] || usage
dir=$(realpath -m "${2:-/tmp/berth-test-cluster}")
case $1 in
  up) up "$dir" ;;
  down) down "$dir" ;;
  *) usage ;;
esac

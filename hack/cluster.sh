#!/usr/bin/env bash
# A local Kubernetes cluster on this machine, without a container engine: a
# control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler), one real node (hack/node: containerd, kubelet,
# kube-proxy, CoreDNS, the image registry it pulls from; needs root) where
# Pods go by default, and kwok, which plays the kubelet of N simulated nodes
# (pods become Running/Ready, Job pods Succeed) where the Pods of namespaces
# annotated scheduler.alpha.kubernetes.io/node-selector=type=kwok go. All
# state lives in .cluster/ (git-ignored).
#
# This script holds the lock and the test processes' claims on the cluster;
# hack/node writes the settings (.cluster/config.json), the certificates and
# kubeconfigs, and starts, watches, restarts and stops every process.
#
# usage:
#   hack/cluster.sh up [--user PID]     start (no-op when already healthy)
#   hack/cluster.sh down                stop every process (hack/node down), remove .cluster/
#   hack/cluster.sh status              components, API health, nodes; exit 1 when unhealthy
#   hack/cluster.sh kubeconfig-sa NS SA write a kubeconfig for ServiceAccount NS/SA, print its path
#   hack/cluster.sh release PID         the test process PID is done with the cluster (see below)
#   hack/cluster.sh restart kube-apiserver  kill -9 the API server and start it again (with the controller manager, the scheduler, kube-proxy and CoreDNS)
#   hack/cluster.sh restart kubelet|containerd  restart the real node's kubelet or containerd (SIGTERM, start); Pods keep running
#   hack/cluster.sh load                push the images `make image` wrote (bin/image) to the real node
#   hack/cluster.sh manager-env         the manager's IMAGE_<KEY>=... that point the chart at the local images
#   hack/cluster.sh insecure-registry HOST:PORT  let the real node pull from that registry over plain HTTP
#   hack/cluster.sh setting NAME        a setting of the running cluster (e.g. NODE_REGISTRY, APISERVER_PORT)
#
# Test binaries call `up --user PID` and `release PID`: a cluster that tests
# started is torn down by the last test process that releases it (unless
# E2E_KEEP_CLUSTER=1); a cluster started by a person (`make cluster-up`) is
# never torn down by tests.
#
# environment (read by `up`; later commands use the values `up` recorded in
# .cluster/config.json):
#   NODES=3  PVS=10  APISERVER_PORT=26443  ETCD_PORT=22379  ETCD_PEER_PORT=22380
#   KCM_PORT=20257  SCHEDULER_PORT=20259  KWOK_PORT=20247
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ASSETS=$ROOT/bin/assets
STATE=$ROOT/.cluster
LOGS=$STATE/logs
ADMIN_KUBECONFIG=$STATE/kubeconfig
export GOTOOLCHAIN=local

START=$SECONDS
log() { printf '[cluster %s +%3ds] %s\n' "$(date +%H:%M:%S)" $((SECONDS - START)) "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# real_node COMMAND [ARG] : hack/node, which starts, watches, restarts and
# stops every daemon of the cluster (9>&- : its daemons must not inherit the
# lock).
real_node() {
  (cd "$ROOT" && go run ./hack/node "$@" -state "$STATE" -assets "$ASSETS" -images "$ROOT/bin/image" \
    -repo "$ROOT") 9>&-
}

# Serialise up/down/release of all callers (people, parallel test binaries).
# The lock file lives outside .cluster/, which `down` removes.
lock() {
  mkdir -p "$ROOT/bin"
  exec 9>"$ROOT/bin/.cluster.lock"
  if ! flock -n 9; then
    log "waiting for another hack/cluster.sh to finish"
    flock 9
  fi
}

# Stops every daemon and undoes what hack/node did to this machine (also
# what a killed run left): each action's down, in reverse order.
stop_processes() {
  log "stopping the cluster (hack/node down)"
  real_node down || log "hack/node down reported errors (above); the next 'up' tries again"
}

# ---------------------------------------------------------------- commands

print_access() {
  log "cluster is up: kubeconfig $ADMIN_KUBECONFIG, logs in $LOGS/"
  echo "KUBECONFIG=$ADMIN_KUBECONFIG"
  echo "export KUBECONFIG=$ADMIN_KUBECONFIG"
}

cmd_up() {
  local user= result
  if [ "${1:-}" = --user ]; then user=${2:?--user needs a PID}; fi
  lock
  log "building tools if needed (hack/tools.sh; a cold build takes several minutes)"
  "$ROOT/hack/tools.sh" >/dev/null
  result=$(real_node start) || die "the cluster did not start (above)"
  if [ "$result" = started ] && [ -n "$user" ]; then touch "$STATE/owned-by-tests"; fi
  if [ -n "$user" ]; then
    mkdir -p "$STATE/users" && : >"$STATE/users/$user"
  else
    rm -f "$STATE/owned-by-tests" # a person asked for it: tests must not tear it down
  fi
  print_access
}

# restart: for fault tests; hack/node says how each daemon restarts.
cmd_restart() {
  local component=${1:?usage: restart kube-apiserver|kubelet|containerd}
  case $component in
    kube-apiserver | kubelet | containerd) ;;
    *) die "restart supports kube-apiserver, kubelet and containerd" ;;
  esac
  lock
  [ -d "$STATE" ] || die "no cluster in $STATE"
  real_node restart "$component"
  log "restarted $component"
}

# load: the images of bin/image (make image) into the real node's registry.
cmd_load() {
  real_node healthy || die "the cluster is not running (make cluster-up)"
  real_node load
}

cmd_down() {
  lock
  if [ ! -d "$STATE" ]; then log "no cluster state in $STATE, nothing to do"; return; fi
  stop_processes
  rm -rf "$STATE"
  log "stopped; removed $STATE"
}

cmd_release() {
  local user=${1:?usage: release PID} f pid live=()
  lock
  [ -d "$STATE" ] || return 0
  rm -f "$STATE/users/$user"
  for f in "$STATE"/users/*; do
    [ -e "$f" ] || continue
    pid=$(basename "$f")
    if kill -0 "$pid" 2>/dev/null; then live+=("$pid"); else rm -f "$f"; fi
  done
  if [ "${E2E_KEEP_CLUSTER:-}" = 1 ]; then
    log "E2E_KEEP_CLUSTER=1: keeping the cluster; export KUBECONFIG=$ADMIN_KUBECONFIG"
  elif [ ${#live[@]} -gt 0 ]; then
    log "keeping the cluster: still used by test processes ${live[*]}"
  elif [ ! -f "$STATE/owned-by-tests" ]; then
    log "keeping the cluster: it was started by make cluster-up"
  else
    stop_processes
    rm -rf "$STATE"
    log "stopped the cluster the tests started; removed $STATE"
  fi
}

cmd_status() {
  if [ ! -d "$STATE" ]; then echo "no cluster (run: make cluster-up)"; return 1; fi
  local ok=0
  real_node status || ok=1
  echo "kubeconfig: $ADMIN_KUBECONFIG   logs: $LOGS/"
  return $ok
}

cmd_kubeconfig_sa() {
  [ -d "$STATE" ] || die "the cluster is not running (make cluster-up)"
  real_node kubeconfig-sa "${1:?usage: kubeconfig-sa NAMESPACE SERVICEACCOUNT}" "${2:?usage: kubeconfig-sa NAMESPACE SERVICEACCOUNT}"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  kubeconfig-sa) shift; cmd_kubeconfig_sa "$@" ;;
  release) shift; cmd_release "$@" ;;
  restart) shift; cmd_restart "$@" ;;
  load) cmd_load ;;
  manager-env) real_node manager-env ;;
  insecure-registry) real_node insecure-registry "${2:?usage: insecure-registry HOST:PORT}" ;;
  setting) real_node setting "${2:?usage: setting NAME}" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac

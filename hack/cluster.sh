#!/usr/bin/env bash
# A local Kubernetes cluster on this machine, without a container engine: a
# control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler), one real node (containerd, kubelet, kube-proxy, CoreDNS,
# the image registry it pulls from; needs root) where Pods go by default,
# and kwok, which plays the kubelet of N simulated nodes (pods become
# Running/Ready, Job pods Succeed) where the Pods of namespaces annotated
# scheduler.alpha.kubernetes.io/node-selector=type=kwok go. All state lives
# in .cluster/ (git-ignored).
#
# hack/node does all of it; this script keeps what a shell does best: it
# builds hack/node into bin/node (go build answers from its cache when the
# sources did not change), builds the tools before `up`, holds the lock
# (bin/.cluster.lock: people and parallel test binaries start, stop and
# release the cluster one at a time) for up, down, release and restart, and
# hands every command to bin/node, which lists them when called without one.
#
# usage:
#   hack/cluster.sh up [--user PID]     start (no-op when already healthy)
#   hack/cluster.sh down                stop every process, undo what the node changed, remove .cluster/
#   hack/cluster.sh status              components, API health, nodes; exit 1 when unhealthy
#   hack/cluster.sh kubeconfig-sa NS SA write a kubeconfig for ServiceAccount NS/SA, print its path
#   hack/cluster.sh release PID         the test process PID is done with the cluster (see below)
#   hack/cluster.sh restart kube-apiserver  kill -9 the API server and start it again (with the controller manager, the scheduler, kube-proxy and CoreDNS)
#   hack/cluster.sh restart kubelet|containerd  restart the real node's kubelet or containerd (SIGTERM, start); Pods keep running
#   hack/cluster.sh load                push the images `make image` wrote (bin/image) to the real node
#   hack/cluster.sh manager-env         the manager's IMAGE_<KEY>=... that point the chart at the local images
#   hack/cluster.sh insecure-registry HOST:PORT  let the real node pull from that registry over plain HTTP
#   hack/cluster.sh setting NAME        a setting of the running cluster (e.g. NODE_REGISTRY, APISERVER_PORT)
#   hack/cluster.sh state               what the node changes on this machine, one fact a line
#   hack/cluster.sh help                every command of bin/node
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
NODE=$ROOT/bin/node
export GOTOOLCHAIN=local

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ $# -eq 0 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi

# bin/node, built once and again only when its sources changed: go build
# then leaves the file as it is (no VCS stamp: another commit or an edit
# elsewhere in the repository would link it again). Two callers at once
# build one after the other (bin/.node-build.lock), so neither runs a
# half-written binary.
mkdir -p "$ROOT/bin"
(
  flock 8
  cd "$ROOT" && go build -buildvcs=false -o "$NODE" ./hack/node 8>&-
) 8>"$ROOT/bin/.node-build.lock"

case $1 in
  up | down | release | restart)
    # The lock file lives outside .cluster/, which down removes. bin/node
    # holds it (exec below) and keeps it from the daemons it starts.
    exec 9>"$ROOT/bin/.cluster.lock"
    if ! flock -n 9; then
      log "waiting for another hack/cluster.sh to finish"
      flock 9
    fi
    ;;
esac
if [ "$1" = up ]; then
  log "building the cluster's tools if needed (hack/tools.sh cluster; a cold build takes several minutes)"
  "$ROOT/hack/tools.sh" cluster >/dev/null
fi

cmd=$1
shift
cd "$ROOT" # bin/node finds the repository (the node's images) from there
exec "$NODE" "$cmd" "$@" -state "$ROOT/.cluster" -assets "$ROOT/bin/assets" -images "$ROOT/bin/image" -repo "$ROOT"

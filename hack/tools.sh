#!/usr/bin/env bash
# Builds the local control plane and developer tools from Go modules into
# bin/<tool>-<version>/ (git-ignored). A binary that already exists is not
# rebuilt, so a second run is a no-op. Prints the directory of every tool
# set on the last lines as NAME=DIR for callers that want to eval them.
#
# usage: hack/tools.sh [cluster|k8s|etcd|kwok|controller-gen|helm|registry|coredns|metrics-server ...]   (default: all)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS="$ROOT/hack/tools"
BIN="$ROOT/bin"
# The tools are not the module's binaries: no FIPS module (the Makefile's
# GOFIPS140 would make them default to fips140=on).
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0 GOFIPS140=off

# version of a required module, read from the tool module's go.mod
modver() { awk -v m="$2" '$1==m || ($1=="require" && $2==m) {print ($1=="require") ? $3 : $2; exit}' "$TOOLS/$1/go.mod"; }

K8S_VERSION=$(modver k8s k8s.io/kubernetes)
ETCD_VERSION=$(modver etcd go.etcd.io/etcd/server/v3)
KWOK_VERSION=$(modver kwok sigs.k8s.io/kwok)
CONTROLLER_GEN_VERSION=$(modver controller-gen sigs.k8s.io/controller-tools)
HELM_VERSION=$(modver helm helm.sh/helm/v3)
REGISTRY_VERSION=$(modver registry github.com/distribution/distribution/v3)
COREDNS_VERSION=$(modver coredns github.com/coredns/coredns)
METRICS_SERVER_VERSION=$(modver metrics-server sigs.k8s.io/metrics-server)

log() { printf '[tools %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# build MODULE_DIR OUT_DIR LDFLAGS NAME=PKG... ; skips when every binary exists
build() {
  local mod=$1 out=$2 ldflags=$3; shift 3
  local missing=() spec
  for spec in "$@"; do [ -x "$out/${spec%%=*}" ] || missing+=("$spec"); done
  if [ ${#missing[@]} = 0 ]; then log "$(basename "$out") is up to date"; return; fi
  log "building $(basename "$out") (${missing[*]%%=*}); cold builds take minutes and Go prints nothing meanwhile"
  local start=$SECONDS
  mkdir -p "$out"
  if [ ${#missing[@]} -gt 1 ]; then
    # One go build for all: shared packages compile once and the binaries
    # link side by side. Each NAME is its package's last path element.
    (cd "$TOOLS/$mod" && go build -trimpath -ldflags "-s -w $ldflags" -o "$out/" "${missing[@]#*=}")
  else
    (cd "$TOOLS/$mod" && go build -trimpath -ldflags "-s -w $ldflags" -o "$out/${missing[0]%%=*}" "${missing[0]#*=}")
  fi
  for spec in "${missing[@]}"; do
    [ -x "$out/${spec%%=*}" ] || { log "go build wrote no $out/${spec%%=*}"; exit 1; }
  done
  log "  $(basename "$out") (${missing[*]%%=*}) done after $((SECONDS - start))s"
}

k8s_ldflags() {
  local v=$K8S_VERSION minor
  minor=$(echo "$v" | cut -d. -f2)
  local f
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  echo "$f"
}

# "cluster" is what the local cluster runs (hack/cluster.sh up builds only
# these); controller-gen and helm serve make manifests and the unit tests.
CLUSTER_TOOLS="k8s etcd kwok registry coredns metrics-server"
want=${*:-$CLUSTER_TOOLS controller-gen helm}
want=${want//cluster/$CLUSTER_TOOLS}
for t in $want; do
  case $t in
    k8s) build k8s "$BIN/k8s-$K8S_VERSION" "$(k8s_ldflags)" \
           kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
           kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
           kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler kubectl=k8s.io/kubernetes/cmd/kubectl \
           kubelet=k8s.io/kubernetes/cmd/kubelet kube-proxy=k8s.io/kubernetes/cmd/kube-proxy ;;
    etcd) build etcd "$BIN/etcd-$ETCD_VERSION" "" etcd=go.etcd.io/etcd/server/v3 ;;
    kwok) build kwok "$BIN/kwok-$KWOK_VERSION" "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" kwok=sigs.k8s.io/kwok/cmd/kwok ;;
    controller-gen) build controller-gen "$BIN/controller-gen-$CONTROLLER_GEN_VERSION" "" controller-gen=sigs.k8s.io/controller-tools/cmd/controller-gen ;;
    helm) build helm "$BIN/helm-$HELM_VERSION" "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" helm=helm.sh/helm/v3/cmd/helm ;;
    # The chart's registry image is distribution; real builds push to it.
    registry) build registry "$BIN/registry-$REGISTRY_VERSION" "-X github.com/distribution/distribution/v3/version.version=$REGISTRY_VERSION" \
           registry=github.com/distribution/distribution/v3/cmd/registry ;;
    # The real node's cluster DNS: CoreDNS with the plugins it uses (main.go).
    coredns) build coredns "$BIN/coredns-$COREDNS_VERSION" "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" coredns=. ;;
    # The resource metrics API (kubectl top, the Functions' HorizontalPodAutoscalers).
    metrics-server) build metrics-server "$BIN/metrics-server-$METRICS_SERVER_VERSION" \
           "-X k8s.io/client-go/pkg/version.gitVersion=$METRICS_SERVER_VERSION" \
           metrics-server=sigs.k8s.io/metrics-server/cmd/metrics-server ;;
    *) echo "unknown tool $t" >&2; exit 2 ;;
  esac
done

# One directory of stable names (bin/assets) for envtest (KUBEBUILDER_ASSETS wants
# etcd, kube-apiserver and kubectl side by side), scripts and the Makefile.
mkdir -p "$BIN/assets"
link() { [ -x "$BIN/$1" ] && ln -sfn "../$1" "$BIN/assets/$(basename "$1")"; return 0; }
link "etcd-$ETCD_VERSION/etcd"
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy; do link "k8s-$K8S_VERSION/$b"; done
link "kwok-$KWOK_VERSION/kwok"
link "controller-gen-$CONTROLLER_GEN_VERSION/controller-gen"
link "helm-$HELM_VERSION/helm"
link "registry-$REGISTRY_VERSION/registry"
link "coredns-$COREDNS_VERSION/coredns"
link "metrics-server-$METRICS_SERVER_VERSION/metrics-server"

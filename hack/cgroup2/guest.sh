#!/bin/bash
# The test of `make test-cgroup2`, inside its guest (hack/cgroup2.sh boots
# it; the guest's init runs this under tini): on the unified hierarchy,
# `make cluster-up`, the module installed as `make run` installs it, a
# Function that builds and answers, `make cluster-down`; the machine must be
# as it was before. Writes its log, the times and its exit status to the
# host's share (/out), then powers the guest off.
set -uo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8

REPO=$(cd "$(dirname "$0")/../.." && pwd)
T0=$(cut -d' ' -f1 /proc/uptime)
OUT=/out

now() { awk '{print $1}' /proc/uptime; }
log() { printf '[guest %s +%6.1fs] %s\n' "$(date +%H:%M:%S)" "$(awk -v t0="$T0" '{print $1 - t0}' /proc/uptime)" "$*" >&2; }
poweroff() {
  sync
  echo o >/proc/sysrq-trigger
  sleep 60
}
finish() {
  local status=$1
  echo "$status" >"$OUT/status"
  log "done: status $status"
  poweroff
}
# time NAME COMMAND...: runs it, records "NAME SECONDS" in $OUT/times
timed() {
  local name=$1 t
  shift
  t=$(now)
  log "$name: $*"
  "$@"
  local rc=$?
  printf '%-40s %8.1f s%s\n' "$name" "$(awk -v t="$t" '{print $1 - t}' /proc/uptime)" "$([ $rc = 0 ] || echo "  (failed: exit $rc)")" >>"$OUT/times"
  return $rc
}

mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mkdir -p "$OUT"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 out "$OUT" || { echo "no /out share"; poweroff; }
exec > >(tee -a "$OUT/guest.log") 2>&1
printf '%-40s %8.1f s\n' "boot: kernel to this script" "$T0" >"$OUT/times"

# shellcheck disable=SC1091 # written by hack/cgroup2.sh
. "$REPO/bin/cgroup2.env"
export GOROOT GOCACHE GOMODCACHE PATH=$GOROOT/bin:$PATH GOTOOLCHAIN=local GOPROXY=off
# as the Makefile exports them (hack/cgroup2.sh builds with them too): the
# guest's go build answers from the host's build cache, where other
# settings would compile everything again under TCG
export CGO_ENABLED=0 GOFLAGS=-trimpath GOFIPS140=v1.0.0
# Go where the host has it, read-only; the build cache's writes go to the
# repository's disk, above the host's cache.
share() { mkdir -p "$2" && mount -t 9p -o "trans=virtio,version=9p2000.L,msize=524288,cache=loose,ro" "$1" "$2"; }
share goroot "$GOROOT" && share gomodcache "$GOMODCACHE" && share gocache /mnt/gocache || finish 10
mkdir -p "$REPO/bin/.gocache/upper" "$REPO/bin/.gocache/work" "$GOCACHE"
mount -t overlay overlay -o "lowerdir=/mnt/gocache,upperdir=$REPO/bin/.gocache/upper,workdir=$REPO/bin/.gocache/work" "$GOCACHE" || finish 11

hostname cgroup2
ip link set lo up
# what a host would have loaded: the bridge's netfilter hook (preflight
# checks it), overlayfs for containerd's snapshots, and conntrack, which
# the first NAT rule loads: its sysctls would appear between the state
# before and after (a module loaded stays; the node unloads none)
modprobe br_netfilter && modprobe overlay && modprobe nf_conntrack || finish 12

log "kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
fs=$(stat -fc %T /sys/fs/cgroup)
log "/sys/fs/cgroup is $fs; controllers: $(cat /sys/fs/cgroup/cgroup.controllers); root's subtree_control: '$(cat /sys/fs/cgroup/cgroup.subtree_control)'"
[ "$fs" = cgroup2fs ] || { log "not the unified hierarchy"; finish 13; }

cd "$REPO" || finish 14
KUBECTL=$REPO/bin/assets/kubectl
export KUBECONFIG=$REPO/.cluster/kubeconfig
k() { "$KUBECTL" "$@"; }
NS=kyma-system

# how fast this guest runs, against the host's figure (hack/cgroup2.sh
# prints both): 20 starts of kubectl
timed "calibration: 20 x kubectl version" bash -c "for i in \$(seq 20); do $KUBECTL version --client >/dev/null; done"

hack/cluster.sh state >/tmp/state-before || finish 15

# While the test runs: every minute, the Pods' phases to the console (a
# slow guest shows where it is), and with cgroup2.debug on the kernel
# command line (CGROUP2_DEBUG=1), $OUT/cmd.sh is run and removed, its
# output written to $OUT/cmd.out: a way in for a person, as the guest has
# no network.
(
  while sleep 5; do
    if [ $((SECONDS % 60)) -lt 5 ] && [ -s "$KUBECONFIG" ]; then
      log "Pods: $(k get pods -A --no-headers 2>/dev/null | awk '{printf "%s/%s %s %s; ", $1, $2, $3, $4}')"
    fi
    if grep -q cgroup2.debug /proc/cmdline && [ -f "$OUT/cmd.sh" ]; then
      bash "$OUT/cmd.sh" >"$OUT/cmd.out.tmp" 2>&1
      mv "$OUT/cmd.out.tmp" "$OUT/cmd.out"
      rm -f "$OUT/cmd.sh"
    fi
  done
) &

test_body() {
  timed "make cluster-up" make --no-print-directory cluster-up || return 20
  log "the node's cgroup: $(cat /sys/fs/cgroup/serverless-local/cgroup.controllers); it gives kubelet's: $(cat /sys/fs/cgroup/serverless-local/cgroup.subtree_control)"
  timed "load the images" hack/cluster.sh load || return 21

  local env=() kv
  while IFS= read -r kv; do env+=(-env "$kv"); done < <(hack/cluster.sh manager-env)
  k create namespace "$NS" --dry-run=client -o yaml | k apply -f - >/dev/null
  # bin/render is hack/render, built on the host (make run: go run ./hack/render)
  bin/render "${env[@]}" | k apply --server-side --force-conflicts --field-manager=make-run -f - >/dev/null || return 22
  timed "manager available" k -n "$NS" rollout status deployment/serverless-manager --timeout=1800s || return 23
  k apply -f config/samples/small-cluster-serverless-cr.yaml >/dev/null || return 24
  timed "Serverless CR Ready" k -n "$NS" wait serverless/default --for=jsonpath='{.status.state}'=Ready --timeout=1800s || return 25
  k -n "$NS" get pods -o wide

  # A Function without dependencies (no network here); the biggest presets:
  # TCG runs Node.js and the build's steps ten times slower or more.
  k apply -f - <<'EOF' || return 26
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: hello
  namespace: default
spec:
  runtime: nodejs22
  source:
    inline:
      source: |
        module.exports = {
          main: function (event, context) {
            return "Hello from cgroup v2";
          }
        };
  resourceConfiguration:
    function:
      profile: XL
    build:
      profile: fast
EOF
  timed "Function built and running" k wait function/hello --for=condition=Running --timeout=2400s || return 27
  local ip body
  ip=$(k get service hello -o jsonpath='{.spec.clusterIP}')
  body=$(timed "Function answers" curl -sS --retry 30 --retry-delay 5 --retry-all-errors --max-time 60 "http://$ip/") || return 28
  log "the Function answered: $body"
  [ "$body" = "Hello from cgroup v2" ] || return 29

  # The Function's container runs with its limits in its v2 cgroup.
  local pod uid dir
  pod=$(k get pods -l serverless.kyma-project.io/function-name=hello,serverless.kyma-project.io/resource=deployment -o jsonpath='{.items[0].metadata.name}')
  uid=$(k get pod "$pod" -o jsonpath='{.metadata.uid}')
  dir=$(find /sys/fs/cgroup/serverless-local -maxdepth 4 -type d -name "pod$uid" | head -n1)
  log "the Function's Pod cgroup: ${dir:-none}"
  [ -n "$dir" ] || return 30
  log "its memory.max: $(cat "$dir/memory.max"), cpu.max: $(cat "$dir/cpu.max")"
  [ "$(cat "$dir/memory.max")" = $((2048 * 1024 * 1024)) ] || return 31
  return 0
}

test_body
rc=$?
if [ $rc != 0 ]; then
  log "FAILED at step $rc; the cluster's state:"
  k get pods -A -o wide 2>&1 | tail -n 40
  k get function hello -o yaml 2>&1 | sed -n '/^status:/,$p'
  mkdir -p "$OUT/cluster-logs"
  cp -r .cluster/logs/. "$OUT/cluster-logs/" 2>/dev/null
fi
timed "make cluster-down" make --no-print-directory cluster-down || { [ $rc = 0 ] && rc=40; }
hack/cluster.sh state >/tmp/state-after
if diff -u /tmp/state-before /tmp/state-after; then
  log "the machine is as it was before make cluster-up"
else
  log "the machine is not as it was before make cluster-up (above: - before, + after)"
  [ $rc = 0 ] && rc=41
fi
finish $rc

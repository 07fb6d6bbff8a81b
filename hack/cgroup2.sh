#!/usr/bin/env bash
# The local cluster on a cgroup v2 (unified) host, proven in a guest: a QEMU
# machine built only from Debian's packages and this repository, booted
# with the unified hierarchy, runs `make cluster-up`, a Function that builds
# and answers, and `make cluster-down` (hack/cgroup2/guest.sh), and prints
# the times. `make test-cgroup2` calls it; it needs root (debootstrap).
#
# usage:
#   hack/cgroup2.sh [run]   build the guest if needed, boot it, run the test, remove what the run made
#   hack/cgroup2.sh build   only build the guest (bin/cgroup2/: kernel, initrd, root image)
#
# The guest (bin/cgroup2/, built once and again when its package list or
# its init changes): Debian's kernel and initramfs, a minimal root file
# system (debootstrap) with containerd, runc, the CNI plugins, iptables,
# nftables, make and tini; no NIC. Each run gives it the repository as a
# disk of its own (a snapshot of the working tree and the built tools,
# images and bin/node, at this repository's path), and read-only shares of
# Go (GOROOT, the module cache, the build cache: the guest's builds answer
# from the host's cache) and one writable share for its log and results.
# The guest's root image is never written (QEMU's snapshot mode).
#
# environment: CGROUP2_SMP=2 CGROUP2_MEM=6G CGROUP2_TIMEOUT=5400 (seconds for
# the whole guest run), CGROUP2_DEBUG=1 (the guest runs bin/cgroup2/.run/out/cmd.sh
# when it appears, its output in cmd.out), CGROUP2_ACCEL=tcg (kvm works only where the host's
# KVM runs a Debian kernel: not on these machines, docs/contributor/local-cluster.md)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$ROOT/bin/cgroup2
export GOTOOLCHAIN=local
# the Makefile's (make test-cgroup2 has them already): bin/node is built
# here with them, and the guest's go build of it answers from this cache
export CGO_ENABLED=0 GOFLAGS=-trimpath GOFIPS140=v1.0.0
SMP=${CGROUP2_SMP:-2}
MEM=${CGROUP2_MEM:-6G}
TIMEOUT=${CGROUP2_TIMEOUT:-5400}
ACCEL=${CGROUP2_ACCEL:-tcg}
START=$SECONDS

log() { printf '[cgroup2 %s +%4ds] %s\n' "$(date +%H:%M:%S)" $((SECONDS - START)) "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The guest's packages, from the host's Debian release.
PACKAGES=linux-image-amd64,containerd,runc,containernetworking-plugins,iptables,nftables,conntrack,iproute2,make,ca-certificates,curl,kmod,procps,e2fsprogs,tini,busybox-static
# PID 1 of the guest, baked into its image: the unified hierarchy, the
# repository's disk at the repository's path (cgroup2.repo= on the kernel
# command line), then the repository's guest script under tini, which reaps
# the orphans the node's daemons leave (a process is gone only once reaped,
# and the node's down waits for its processes to be gone).
INIT='#!/bin/sh
mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
mount -t cgroup2 cgroup2 /sys/fs/cgroup
repo=$(sed -n "s/.*cgroup2.repo=\([^ ]*\).*/\1/p" /proc/cmdline)
mkdir -p "$repo" && mount /dev/vdb "$repo"
exec /usr/bin/tini -s -- /bin/bash "$repo/hack/cgroup2/guest.sh"
'

# Host commands -> Debian package.
need() {
  declare -A pkg=([qemu-system-x86_64]=qemu-system-x86 [debootstrap]=debootstrap [mke2fs]=e2fsprogs)
  local missing=() c
  for c in "${!pkg[@]}"; do command -v "$c" >/dev/null || missing+=("${pkg[$c]}"); done
  [ ${#missing[@]} = 0 ] && return
  [ "$(id -u)" = 0 ] || die "needs root (apt-get install ${missing[*]}, debootstrap)"
  log "installing from Debian: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

stamp() { printf '%s\n%s\n' "$PACKAGES" "$INIT" | sha256sum | cut -c1-16; }

built() { [ -s "$DIR/vmlinuz" ] && [ -s "$DIR/initrd.img" ] && [ -s "$DIR/root.img" ] && [ "$(cat "$DIR/stamp" 2>/dev/null)" = "$(stamp)" ]; }

# build: debootstrap into bin/cgroup2/.build (a dot directory: go's ./...
# patterns skip it, and debootstrap mounts /proc inside while it works),
# then the kernel and initramfs out of it and the rest into an ext4 image.
build() {
  built && return
  [ "$(id -u)" = 0 ] || die "building the guest needs root (debootstrap)"
  need
  local suite mirror t=$SECONDS
  suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
  # the host's own Debian mirror, as apt has it configured
  mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Identifier: Packages' | awk -v s="$suite" '$2 == s {print $1; exit}')
  [ -n "$mirror" ] || die "no Debian mirror for $suite in apt's sources"
  log "building the guest: debootstrap $suite with $PACKAGES (a few minutes)"
  trap cleanup EXIT
  remove_build
  rm -f "$DIR/stamp"
  mkdir -p "$DIR/.build" "$DIR/.debs"
  if ! nice -n 19 debootstrap --variant=minbase --cache-dir="$DIR/.debs" --include="$PACKAGES" \
    "$suite" "$DIR/.build/rootfs" "$mirror" >"$DIR/.build/debootstrap.log" 2>&1; then
    tail -n 20 "$DIR/.build/debootstrap.log" >&2
    mkdir -p "$ROOT/tests/.artifacts/cgroup2"
    cp "$DIR/.build/debootstrap.log" "$ROOT/tests/.artifacts/cgroup2/"
    die "debootstrap failed (log: tests/.artifacts/cgroup2/debootstrap.log)"
  fi
  local fs=$DIR/.build/rootfs
  local kernel
  kernel=$(ls "$fs"/boot/vmlinuz-* | tail -n1)
  cp "$kernel" "$DIR/vmlinuz"
  cp "$(ls "$fs"/boot/initrd.img-* | tail -n1)" "$DIR/initrd.img"
  printf '%s' "$INIT" >"$fs/sbin/cgroup2-init"
  chmod 755 "$fs/sbin/cgroup2-init"
  echo cgroup2 >"$fs/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 cgroup2\n' >"$fs/etc/hosts"
  # no network: the node's CoreDNS gets a resolver that answers nothing
  printf 'nameserver 127.0.0.1\n' >"$fs/etc/resolv.conf"
  rm -rf "$fs"/var/cache/apt/archives/*.deb "$fs"/var/lib/apt/lists/*
  rm -f "$DIR/root.img"
  nice -n 19 mke2fs -q -t ext4 -L cgroup2-root -d "$fs" "$DIR/root.img" 3G
  remove_build
  stamp >"$DIR/stamp"
  log "guest built in $((SECONDS - t))s: $(du -sh "$DIR/root.img" | cut -f1) root image, kernel ${kernel##*/vmlinuz-}"
}

# remove_build removes debootstrap's tree, after what it mounted inside
# (/proc, /sys: an interrupted debootstrap leaves them).
remove_build() {
  awk -v d="$DIR/.build/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | xargs -r umount -l
  rm -rf "$DIR/.build"
}

RUN=$DIR/.run
QEMU_PID=

# cleanup, on every exit: the guest, the run's files, a build cut short.
cleanup() {
  if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
    kill "$QEMU_PID" 2>/dev/null || true
    wait "$QEMU_PID" 2>/dev/null || true
  fi
  rm -rf "$RUN"
  [ ! -d "$DIR/.build" ] || remove_build
}
trap 'exit 130' INT TERM

# stage: the repository as the guest sees it, hard links into
# bin/cgroup2/.run/stage (the working tree's files that git tracks or would
# track, the built tools, images and binaries; no .git, no .cluster, no
# npm cache), written into a disk image of its own.
stage() {
  local stage=$RUN/stage
  mkdir -p "$stage/bin"
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -l -t "$stage" 2>/dev/null) ||
    (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
      [ -e "$f" ] && cp --parents -l -t "$stage" "$f"
    done)
  local b
  for b in "$ROOT"/bin/*; do
    case $(basename "$b") in cache | cgroup2) continue ;; esac
    cp -al "$b" "$stage/bin/"
  done
  # the rendered install YAML's renderer, built here (the guest runs it as
  # make run runs `go run ./hack/render`)
  (cd "$ROOT" && nice -n 19 go build -o "$stage/bin/render" ./hack/render)
  # the guest's environment: Go where the host has it
  {
    echo "REPO=$ROOT"
    echo "GOROOT=$(go env GOROOT)"
    echo "GOCACHE=$(go env GOCACHE)"
    echo "GOMODCACHE=$(go env GOMODCACHE)"
  } >"$stage/bin/cgroup2.env"
  nice -n 19 mke2fs -q -t ext4 -L cgroup2-repo -d "$stage" "$RUN/repo.img" 24G
  rm -rf "$stage"
}

run() {
  [ "$(id -u)" = 0 ] || die "needs root"
  need
  build
  trap cleanup EXIT
  rm -rf "$RUN"
  mkdir -p "$RUN/out"
  # make test-cgroup2 built the tools and the images (make tools image)
  [ -d "$ROOT/bin/image/local" ] && [ -x "$ROOT/bin/assets/kubelet" ] || die "no tools or images in bin/: make tools image"
  log "building bin/node and hack/render for the guest"
  # as hack/cluster.sh builds it, under its lock
  (cd "$ROOT" && flock bin/.node-build.lock nice -n 19 go build -buildvcs=false -o bin/node ./hack/node)
  log "the repository's disk"
  stage
  # the guest's first figure, here: how much slower the guest runs
  local host_calibration
  host_calibration=$( { TIMEFORMAT=%R; time (for _ in $(seq 20); do "$ROOT/bin/assets/kubectl" version --client >/dev/null; done); } 2>&1)
  local accel=(-accel tcg,thread=multi -cpu max)
  [ "$ACCEL" = kvm ] && accel=(-enable-kvm -cpu host)
  log "booting the guest ($ACCEL, $SMP CPUs, $MEM; its console: $RUN/out/console.log)"
  local t=$SECONDS
  : >"$RUN/out/console.log"
  nice -n 19 qemu-system-x86_64 "${accel[@]}" -machine q35 -smp "$SMP" -m "$MEM" \
    -nographic -no-reboot -nic none \
    -kernel "$DIR/vmlinuz" -initrd "$DIR/initrd.img" \
    -append "console=ttyS0 root=/dev/vda rw init=/sbin/cgroup2-init panic=-1 quiet cgroup2.repo=$ROOT${CGROUP2_DEBUG:+ cgroup2.debug}" \
    -drive "file=$DIR/root.img,format=raw,if=virtio,snapshot=on" \
    -drive "file=$RUN/repo.img,format=raw,if=virtio" \
    -virtfs "local,path=$(go env GOROOT),mount_tag=goroot,security_model=none,readonly=on" \
    -virtfs "local,path=$(go env GOMODCACHE),mount_tag=gomodcache,security_model=none,readonly=on" \
    -virtfs "local,path=$(go env GOCACHE),mount_tag=gocache,security_model=none,readonly=on" \
    -virtfs "local,path=$RUN/out,mount_tag=out,security_model=none" \
    </dev/null >"$RUN/out/console.log" 2>&1 &
  QEMU_PID=$!
  # The guest prints its progress to its console; follow it here. The
  # deadline is generous: TCG is slow, and the machine may be busy.
  tail -n +1 -f "$RUN/out/console.log" --pid "$QEMU_PID" &
  local tail_pid=$! deadline=$((SECONDS + TIMEOUT))
  while kill -0 "$QEMU_PID" 2>/dev/null; do
    if [ $SECONDS -gt $deadline ]; then
      log "the guest did not finish within ${TIMEOUT}s; stopping it"
      break
    fi
    sleep 5
  done
  kill "$tail_pid" 2>/dev/null || true
  wait "$tail_pid" 2>/dev/null || true
  log "the guest ran for $((SECONDS - t))s"
  printf '%-40s %8.1f s\n' "on this host: 20 x kubectl version" "$host_calibration"
  [ -s "$RUN/out/times" ] && cat "$RUN/out/times"
  local status
  status=$(cat "$RUN/out/status" 2>/dev/null || echo "none (the guest did not finish)")
  if [ "$status" != 0 ]; then
    mkdir -p "$ROOT/tests/.artifacts/cgroup2"
    cp -r "$RUN/out/." "$ROOT/tests/.artifacts/cgroup2/"
    die "the guest's test failed (status $status); its console and logs: tests/.artifacts/cgroup2/"
  fi
  log "test-cgroup2: passed"
}

case ${1:-run} in
  build) build ;;
  run) run ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac

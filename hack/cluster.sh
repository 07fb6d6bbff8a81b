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
# usage:
#   hack/cluster.sh up [--user PID]     start (no-op when already healthy)
#   hack/cluster.sh down                stop the recorded processes, remove .cluster/
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
# environment (read by `up`; later commands use the values `up` recorded):
#   NODES=3  PVS=10  APISERVER_PORT=26443  ETCD_PORT=22379  ETCD_PEER_PORT=22380
#   KCM_PORT=20257  SCHEDULER_PORT=20259  KWOK_PORT=20247
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ASSETS=$ROOT/bin/assets
STATE=$ROOT/.cluster
PKI=$STATE/pki
LOGS=$STATE/logs
PIDS=$STATE/pids
KUBECONFIGS=$STATE/kubeconfigs
ADMIN_KUBECONFIG=$STATE/kubeconfig
CONFIG_ENV=$STATE/cluster.env
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok image-registry containerd kubelet kube-proxy coredns metrics-server)
# The real node (hack/node): its name and address (the first of its Pod
# range, on the bridge it makes): Pods reach the API server, DNS and the
# image registry there, so the API server listens there too.
NODE_NAME=real-node
NODE_POD_CIDR=10.240.0.0/24
NODE_IP=10.240.0.1
NODE_REGISTRY=$NODE_IP:5000
# metrics-server (hack/node) serves the metrics API there, behind the
# Service kube-system/metrics-server.
NODE_METRICS_PORT=4443
export GOTOOLCHAIN=local

START=$SECONDS
log() { printf '[cluster %s +%3ds] %s\n' "$(date +%H:%M:%S)" $((SECONDS - START)) "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Settings: the caller's environment or these defaults; the values recorded by
# `up` win once a cluster exists, so status/down/kubeconfig-sa talk to the
# cluster that is actually there.
SETTINGS="NODES=3 PVS=10 APISERVER_PORT=26443 ETCD_PORT=22379 ETCD_PEER_PORT=22380 KCM_PORT=20257 SCHEDULER_PORT=20259 KWOK_PORT=20247"
declare -A CALLER
for kv in $SETTINGS; do name=${kv%%=*}; CALLER[$name]=${!name:-${kv#*=}}; done
load_config() {
  local kv name
  for kv in $SETTINGS; do name=${kv%%=*}; printf -v "$name" '%s' "${CALLER[$name]}"; done
  # shellcheck source=/dev/null
  if [ -f "$CONFIG_ENV" ]; then . "$CONFIG_ENV"; fi
}

save_config() {
  local kv name
  : >"$CONFIG_ENV"
  for kv in $SETTINGS; do name=${kv%%=*}; echo "$name=${!name}" >>"$CONFIG_ENV"; done
  # fixed, recorded for tests and scripts (hack/cluster.sh setting NAME)
  for name in NODE_NAME NODE_POD_CIDR NODE_IP NODE_REGISTRY; do echo "$name=${!name}" >>"$CONFIG_ENV"; done
}

# warns when the caller asked for settings the running cluster does not have
warn_config_differs() {
  local kv name
  for kv in $SETTINGS; do
    name=${kv%%=*}
    [ "${CALLER[$name]}" = "${!name}" ] || log "note: the running cluster has $name=${!name} (asked for ${CALLER[$name]}); run 'hack/cluster.sh down' first to change it"
  done
}

k() { "$ASSETS/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" --request-timeout=10s "$@"; }

# real_node COMMAND [ARG] : hack/node with this cluster's settings (9>&- :
# its daemons must not inherit the lock).
real_node() {
  (cd "$ROOT" && go run ./hack/node "$@" -state "$STATE" -assets "$ASSETS" -images "$ROOT/bin/image" \
    -name "$NODE_NAME" -pod-cidr "$NODE_POD_CIDR" -registry-port "${NODE_REGISTRY##*:}" -apiserver-port "$APISERVER_PORT" -metrics-server-port "$NODE_METRICS_PORT") 9>&-
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

# ---------------------------------------------------------------- processes

pidof_component() { cat "$PIDS/$1.pid" 2>/dev/null || true; }

# A recorded PID counts only while it is alive and still one of ours: every
# component's command line names a path inside .cluster/, which guards
# against a PID the kernel reused for an unrelated process.
is_ours() {
  local pid=$1 cmd
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *"$STATE/"* ]]
}

# start NAME ARGS... : runs bin/assets/NAME detached (own session, no
# terminal, output to its log) and records its PID.
start() {
  local name=$1; shift
  # 9>&- : the component must not inherit (and so hold) the lock
  # appended: a restarted component keeps what it logged before the restart
  setsid "$ASSETS/$name" "$@" </dev/null >>"$LOGS/$name.log" 2>&1 9>&- &
  local pid=$! i
  echo "$pid" >"$PIDS/$name.pid"
  # until the forked shell has exec'd the binary its command line is ours
  # (bash's), which is_ours does not recognise; wait for the exec
  for ((i = 0; i < 100; i++)); do
    is_ours "$pid" || ! kill -0 "$pid" 2>/dev/null && break
    sleep 0.02
  done
}

# Fails with the tail of its log when a started component has exited.
check_alive() {
  local c pid
  for c in "${COMPONENTS[@]}"; do
    [ -f "$PIDS/$c.pid" ] || continue
    pid=$(pidof_component "$c")
    if ! is_ours "$pid"; then
      log "$c (pid $pid) exited; last lines of $LOGS/$c.log:"
      tail -n 25 "$LOGS/$c.log" >&2 || true
      return 1
    fi
  done
}

# wait_for SECONDS WHAT COMMAND... : polls COMMAND until it succeeds.
wait_for() {
  local timeout=$1 what=$2; shift 2
  local deadline=$((SECONDS + timeout)) t0=$SECONDS
  until "$@" >/dev/null 2>&1; do
    check_alive || die "a component died while waiting for $what"
    [ $SECONDS -lt $deadline ] || die "timed out after ${timeout}s waiting for $what"
    sleep 0.3
  done
  log "$what after $((SECONDS - t0))s"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Stops the recorded components: the real node first (hack/node undoes all
# it did to this machine, also what a killed run left), then the API
# clients, then kube-apiserver, then etcd, so none of them hangs on a peer
# that is already gone. Each group gets TERM and, after 5s, KILL.
stop_processes() {
  if [ -d "$STATE/node" ]; then
    log "stopping the real node (hack/node down)"
    real_node down || log "hack/node down reported errors (above); the next 'up' tries again"
  fi
  stop_group kwok kube-scheduler kube-controller-manager
  stop_group kube-apiserver
  stop_group etcd
}

stop_group() {
  local c pid pids=() names=() left
  for c in "$@"; do
    pid=$(pidof_component "$c")
    if is_ours "$pid"; then pids+=("$pid"); names+=("$c"); fi
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  log "stopping ${names[*]} (pid ${pids[*]})"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  local deadline=$((SECONDS + 5)) killed=
  while :; do
    left=()
    for pid in "${pids[@]}"; do if is_ours "$pid"; then left+=("$pid"); fi; done
    [ ${#left[@]} -gt 0 ] || return 0
    if [ -z "$killed" ] && [ $SECONDS -ge $deadline ]; then
      log "still running after 5s, sending KILL to ${left[*]}"
      kill -KILL "${left[@]}" 2>/dev/null || true
      killed=1
    fi
    sleep 0.1
  done
}

# ---------------------------------------------------------------- health

nodes_ready() {
  # a node counts when it is Ready and carries no taint (the node-lifecycle
  # controller lifts node.kubernetes.io/not-ready once kwok reports Ready)
  local ready
  ready=$(k get nodes -l type=kwok -o jsonpath='{range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} {.spec.taints[*].key}{"\n"}{end}' |
    awk '$2 == "True" && NF == 2' | wc -l)
  [ "$ready" -ge "$NODES" ]
}

real_node_ready() {
  [ "$(k get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

apiserver_ready() { [ "$(k get --raw=/readyz 2>/dev/null)" = ok ]; }

healthy() {
  [ -f "$STATE/ready" ] || return 1
  local c
  for c in "${COMPONENTS[@]}"; do is_ours "$(pidof_component "$c")" || return 1; done
  apiserver_ready && nodes_ready && real_node_ready
}

# ---------------------------------------------------------------- setup

b64() { base64 -w0 <"$1"; }

# write_kubeconfig FILE USER (client certificate PKI/USER.crt) | FILE USER token TOKEN
write_kubeconfig() {
  local file=$1 user=$2 auth
  if [ "${3:-}" = token ]; then
    auth="    token: $4"
  else
    auth="    client-certificate-data: $(b64 "$PKI/$user.crt")
    client-key-data: $(b64 "$PKI/$user.key")"
  fi
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: serverless-local
  cluster:
    server: https://$NODE_IP:$APISERVER_PORT
    certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
- name: $user
  user:
$auth
contexts:
- name: $user@serverless-local
  context:
    cluster: serverless-local
    user: $user
current-context: $user@serverless-local
EOF
  chmod 600 "$file"
}

# the stock kwok stages ship in the kwok Go module that hack/tools.sh built
# kwok from; `go mod download` finds it in the module cache (or fetches it)
kwok_stage_configs() {
  local dir
  dir=$(cd "$ROOT/hack/tools/kwok" && GOFLAGS=-mod=mod go mod download -json sigs.k8s.io/kwok |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  [ -d "$dir/kustomize/stage" ] || die "kwok module not found (go mod download sigs.k8s.io/kwok in hack/tools/kwok)"
  local s=$dir/kustomize/stage
  echo "$s/node/fast/node-initialize.yaml,$s/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml,$s/pod/fast/pod-ready.yaml,$s/pod/fast/pod-complete.yaml,$s/pod/fast/pod-delete.yaml"
}

# Nodes managed by kwok (selected by the kwok.x-k8s.io/node annotation), the
# default StorageClass, a pool of static volumes (scrubbed and handed back
# when released: Recycle, by a Pod on the real node) and the RBAC of the
# real node's parts that have no built-in binding.
bootstrap_objects() {
  local i zones=(a b c)
  cat <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: Immediate
---
# the API server's calls to kubelets (logs, exec, port-forward)
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kube-apiserver-kubelet-client
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:kubelet-api-admin}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client}
---
# CoreDNS's kubernetes plugin
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups: [""]
  resources: [services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:coredns}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: system:coredns}
---
# metrics-server: reads nodes and Pods, calls kubelets' resource metrics,
# and asks the API server who may read the metrics API
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:metrics-server
rules:
- apiGroups: [""]
  resources: [nodes/metrics]
  verbs: [get]
- apiGroups: [""]
  resources: [pods, nodes]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:metrics-server
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:metrics-server}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: system:metrics-server}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: metrics-server:system:auth-delegator
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:auth-delegator}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: system:metrics-server}
---
# the metrics API, served by metrics-server on the node's address (the API
# server goes to the EndpointSlice's address: --enable-aggregator-routing)
apiVersion: v1
kind: Service
metadata:
  name: metrics-server
  namespace: kube-system
spec:
  ports: [{name: https, port: 443, targetPort: $NODE_METRICS_PORT}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: metrics-server
  namespace: kube-system
  labels: {kubernetes.io/service-name: metrics-server}
addressType: IPv4
ports: [{name: https, port: $NODE_METRICS_PORT, protocol: TCP}]
endpoints: [{addresses: ["$NODE_IP"]}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.metrics.k8s.io
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  service: {namespace: kube-system, name: metrics-server, port: 443}
  caBundle: $(b64 "$PKI/ca.crt")
EOF
  for ((i = 0; i < NODES; i++)); do
    cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    type: kwok
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    kubernetes.io/hostname: kwok-node-$i
    topology.kubernetes.io/zone: zone-${zones[i % 3]}
status:
  addresses: [{type: InternalIP, address: 10.0.0.$((i + 10))}, {type: Hostname, address: kwok-node-$i}]
  capacity: {cpu: "32", memory: 256Gi, pods: "110", ephemeral-storage: 500Gi}
  allocatable: {cpu: "32", memory: 256Gi, pods: "110", ephemeral-storage: 500Gi}
EOF
  done
  for ((i = 0; i < PVS; i++)); do
    mkdir -p "$STATE/volumes/pv-$i"
    cat <<EOF
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: local-pv-$i
  labels:
    local.serverless.kyma-project.io/pool: static
spec:
  capacity: {storage: 100Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Recycle
  storageClassName: standard
  volumeMode: Filesystem
  hostPath: {path: "$STATE/volumes/pv-$i", type: DirectoryOrCreate}
EOF
  done
}

# start_kcm starts kube-controller-manager (also used by `restart`). The
# HorizontalPodAutoscalers act within seconds here (every 5 s instead of 15,
# down after 30 s without a higher recommendation instead of 5 minutes), so
# that the tests see a Function scale out and back in.
start_kcm() {
  start kube-controller-manager --kubeconfig="$KUBECONFIGS/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="$KUBECONFIGS/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig="$KUBECONFIGS/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --leader-elect=false \
    --controllers='*,-nodeipam' --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --pv-recycler-pod-template-filepath-hostpath="$STATE/node/recycler-pod.yaml" \
    --horizontal-pod-autoscaler-sync-period=5s --horizontal-pod-autoscaler-downscale-stabilization=30s \
    --kube-api-qps=100 --kube-api-burst=200
}

# start_apiserver starts kube-apiserver (also used by `restart kube-apiserver`).
# It listens on the real node's address, which Pods reach (the kubernetes
# Service's endpoint). Pods without a node selector of their own go to the
# real node; a namespace annotated scheduler.alpha.kubernetes.io/node-selector
# =type=kwok sends its Pods to the simulated nodes (PodNodeSelector).
start_scheduler() {
  start kube-scheduler --kubeconfig="$KUBECONFIGS/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$KUBECONFIGS/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$KUBECONFIGS/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --leader-elect=false
}

start_apiserver() {
  log "starting kube-apiserver on https://$NODE_IP:$APISERVER_PORT"
  # audit: events are written synchronously by the request handler (blocking,
  # none dropped) into one file (maxsize 0 would mean rotation at 100 MB)
  start kube-apiserver --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port="$APISERVER_PORT" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" --client-ca-file="$PKI/ca.crt" \
    --kubelet-client-certificate="$PKI/kube-apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/kube-apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --authorization-mode=Node,RBAC --allow-privileged=true \
    --enable-admission-plugins=PodNodeSelector --admission-control-config-file="$ROOT/hack/cluster/admission.yaml" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range=10.96.0.0/16 \
    --audit-policy-file="$ROOT/hack/cluster/audit-policy.yaml" --audit-log-path="$STATE/audit.log" --audit-log-mode=blocking \
    --audit-log-maxsize=100000 \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --enable-aggregator-routing=true \
    --cert-dir="$PKI"
}

start_cluster() {
  local p kv name
  for kv in $SETTINGS; do
    name=${kv%%=*}
    [[ ${!name} =~ ^[1-9][0-9]*$ ]] || die "$name must be a positive number, not '${!name}'"
  done
  for p in "$APISERVER_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT" "$KCM_PORT" "$SCHEDULER_PORT" "$KWOK_PORT"; do
    port_in_use "$p" && die "port $p is in use by another process; pick other ports via APISERVER_PORT, ETCD_PORT, ETCD_PEER_PORT, KCM_PORT, SCHEDULER_PORT, KWOK_PORT"
  done
  mkdir -p "$PKI" "$LOGS" "$PIDS" "$KUBECONFIGS" "$STATE/etcd"
  save_config

  log "generating certificates (hack/certgen)"
  (cd "$ROOT" && go run ./hack/certgen -dir "$PKI" -node-name "$NODE_NAME" -node-ip "$NODE_IP")
  write_kubeconfig "$ADMIN_KUBECONFIG" admin
  for c in kube-controller-manager kube-scheduler kwok node kube-proxy coredns metrics-server; do write_kubeconfig "$KUBECONFIGS/$c.kubeconfig" "$c"; done

  log "setting up the real node's network (hack/node network)"
  real_node network
  local stages
  stages=$(kwok_stage_configs)

  log "starting etcd on 127.0.0.1:$ETCD_PORT"
  # --unsafe-no-fsync: a throw-away cluster does not need durable writes
  start etcd --name=local --data-dir="$STATE/etcd" --unsafe-no-fsync \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="local=http://127.0.0.1:$ETCD_PEER_PORT"
  wait_for 30 "etcd accepts connections" port_in_use "$ETCD_PORT"

  start_apiserver
  wait_for 120 "kube-apiserver /readyz ok" apiserver_ready

  log "starting kube-controller-manager, kube-scheduler and kwok"
  start_kcm
  start_scheduler
  start kwok --kubeconfig="$KUBECONFIGS/kwok.kubeconfig" --config="$stages" \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds=40 --cidr=10.244.0.1/16 --server-address="127.0.0.1:$KWOK_PORT"

  log "creating $NODES nodes, StorageClass standard and $PVS PersistentVolumes"
  bootstrap_objects | k apply -f - >/dev/null
  wait_for 120 "$NODES nodes Ready" nodes_ready
  log "starting the real node $NODE_NAME (hack/node up)"
  real_node up
  wait_for 60 "node $NODE_NAME Ready" real_node_ready
  wait_for 60 "default ServiceAccount exists" k get serviceaccount default -n default
  check_alive || die "a component died during start"
  touch "$STATE/ready"
}

# ---------------------------------------------------------------- commands

print_access() {
  log "cluster is up: kubeconfig $ADMIN_KUBECONFIG, logs in $LOGS/"
  echo "KUBECONFIG=$ADMIN_KUBECONFIG"
  echo "export KUBECONFIG=$ADMIN_KUBECONFIG"
}

# EXIT trap while starting: after a failure stop what was started and keep
# only the logs for diagnosis; the next `up` starts afresh.
# shellcheck disable=SC2317 # invoked by trap
on_failed_start() {
  local status=$?
  [ "$status" != 0 ] || return 0
  log "start failed; stopping what was started"
  stop_processes
  if [ -d "$LOGS" ]; then
    find "$STATE" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
    log "logs of the failed start are in $LOGS/"
  else
    rm -rf "$STATE"
  fi
}

cmd_up() {
  local user=
  if [ "${1:-}" = --user ]; then user=${2:?--user needs a PID}; fi
  lock
  log "building tools if needed (hack/tools.sh; a cold build takes several minutes)"
  "$ROOT/hack/tools.sh" >/dev/null
  load_config
  if healthy; then
    log "already running and healthy (nodes: $NODES simulated and $NODE_NAME, API: https://$NODE_IP:$APISERVER_PORT)"
    warn_config_differs
  else
    if [ -d "$STATE" ]; then
      log "found a stopped or unhealthy cluster in $STATE, cleaning it up"
      stop_processes
      rm -rf "$STATE"
      load_config
    fi
    trap on_failed_start EXIT
    start_cluster
    trap - EXIT
    [ -z "$user" ] || touch "$STATE/owned-by-tests"
  fi
  if [ -n "$user" ]; then
    mkdir -p "$STATE/users" && : >"$STATE/users/$user"
  else
    rm -f "$STATE/owned-by-tests" # a person asked for it: tests must not tear it down
  fi
  print_access
}

# restart kube-apiserver: stops the API server (SIGKILL, as a crash would)
# and starts it again with the same state, for fault tests.
cmd_restart() {
  local component=${1:?usage: restart kube-apiserver|kubelet|containerd} pid c
  lock
  load_config
  [ -d "$STATE" ] || die "no cluster in $STATE"
  case $component in
    kube-apiserver) ;;
    kubelet | containerd)
      real_node restart "$component"
      wait_for 60 "node $NODE_NAME Ready" real_node_ready
      return ;;
    *) die "restart supports kube-apiserver, kubelet and containerd" ;;
  esac
  pid=$(pidof_component kube-apiserver)
  if is_ours "$pid"; then
    kill -KILL "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  fi
  start_apiserver
  wait_for 120 "kube-apiserver /readyz ok" apiserver_ready
  # kube-controller-manager's garbage collector does not recover from a hard
  # API server restart here (ReplicaSets of deleted Deployments stayed
  # orphaned for minutes), and kube-scheduler reported its cache corrupted
  # after one and was gone minutes later, Pods left Pending: both restart
  # with the API server.
  for c in kube-controller-manager kube-scheduler; do
    pid=$(pidof_component "$c")
    if is_ours "$pid"; then
      kill -TERM "$pid"
      while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    fi
  done
  start_kcm
  start_scheduler
  # The node's kube-proxy and CoreDNS recover by themselves, but late: the
  # new API server refuses their watches (403) until its authorizer has
  # loaded, and client-go then backs off for up to a minute. Meanwhile a new
  # Service had no rule and no name (measured: rules 62 s after the Service,
  # builds failing with "no route to host" to the registry's address).
  real_node restart kube-proxy
  real_node restart coredns
}

# load: the images of bin/image (make image) into the real node's registry.
cmd_load() {
  load_config
  healthy || die "the cluster is not running (make cluster-up)"
  real_node load
}

cmd_down() {
  lock
  load_config
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
    load_config
    stop_processes
    rm -rf "$STATE"
    log "stopped the cluster the tests started; removed $STATE"
  fi
}

cmd_status() {
  load_config
  if [ ! -d "$STATE" ]; then echo "no cluster (run: make cluster-up)"; return 1; fi
  local c pid ok=0
  for c in "${COMPONENTS[@]}"; do
    pid=$(pidof_component "$c")
    if is_ours "$pid"; then printf '%-24s running (pid %s)\n' "$c" "$pid"; else printf '%-24s NOT running\n' "$c"; ok=1; fi
  done
  if apiserver_ready; then echo "kube-apiserver /readyz   ok (https://$NODE_IP:$APISERVER_PORT)"; else echo "kube-apiserver /readyz   NOT ok"; ok=1; fi
  if [ $ok = 0 ]; then
    k get nodes -o wide || ok=1
    nodes_ready || { echo "fewer than $NODES simulated nodes are Ready"; ok=1; }
    real_node_ready || { echo "node $NODE_NAME is not Ready"; ok=1; }
  fi
  echo "kubeconfig: $ADMIN_KUBECONFIG   logs: $LOGS/"
  return $ok
}

cmd_kubeconfig_sa() {
  local ns=${1:?usage: kubeconfig-sa NAMESPACE SERVICEACCOUNT} sa=${2:?usage: kubeconfig-sa NAMESPACE SERVICEACCOUNT} token
  load_config
  apiserver_ready || die "the cluster is not running (make cluster-up)"
  token=$(k create token "$sa" -n "$ns" --duration=24h) || die "could not get a token for ServiceAccount $ns/$sa"
  local file=$KUBECONFIGS/sa-$ns-$sa.kubeconfig
  write_kubeconfig "$file" "system:serviceaccount:$ns:$sa" token "$token"
  echo "$file"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  kubeconfig-sa) shift; cmd_kubeconfig_sa "$@" ;;
  release) shift; cmd_release "$@" ;;
  restart) shift; cmd_restart "$@" ;;
  load) cmd_load ;;
  manager-env) load_config; real_node manager-env ;;
  insecure-registry) load_config; real_node insecure-registry "${2:?usage: insecure-registry HOST:PORT}" ;;
  setting) load_config; v=${2:?usage: setting NAME}; echo "${!v:?no setting $v}" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# make run: the local cluster, the manager running here as its own
# ServiceAccount, the default Serverless CR until Ready, then the Function
# controller running here exactly as the chart's Deployment configures it
# (the local cluster only simulates its Pod). Ctrl-C stops both;
# `make cluster-down` removes the cluster.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
KUBECTL=$ROOT/bin/assets/kubectl
NS=kyma-system
START=$SECONDS
log() { printf '[run %s +%3ds] %s\n' "$(date +%H:%M:%S)" $((SECONDS - START)) "$*" >&2; }

log "building the control plane and tools (cold: several minutes; a no-op when built)"
hack/tools.sh
log "building bin/manager, bin/function-controller and bin/registry-agent"
"${MAKE:-make}" --no-print-directory build
go build -o bin/podrun ./hack/podrun
go build -o bin/localnode ./hack/localnode
log "starting the local cluster"
hack/cluster.sh up
export KUBECONFIG=$ROOT/.cluster/kubeconfig
k() { "$KUBECTL" "$@"; }

log "installing the Serverless CRD and the manager's RBAC"
k create namespace "$NS" --dry-run=client -o yaml | k apply -f - >/dev/null
k apply --server-side --field-manager=make-run -f config/crd/bases >/dev/null
if [ -f config/rbac/kustomization.yaml ]; then
  k apply --server-side --field-manager=make-run -k config/rbac >/dev/null
else
  k apply --server-side --field-manager=make-run -n "$NS" -f config/rbac >/dev/null
fi
SA_KUBECONFIG=$(hack/cluster.sh kubeconfig-sa "$NS" serverless-manager)

# Runtime images cannot be pulled on this machine: the manager points them
# at the internal registry, as at a mirror (IMAGE_<KEY>), and bin/localnode
# fills it with stand-ins so that builds run for real.
MIRROR=serverless-docker-registry.$NS.svc.cluster.local:5000/stand-in
RUNTIME_IMAGES=()
for key in $(sed -n 's/^    \(function_runtime_[a-z0-9]*\):$/\1/p' charts/serverless/values.yaml); do
  RUNTIME_IMAGES+=("IMAGE_${key^^}=$MIRROR/${key//_/-}:local")
done

# The internal registry and build Pods run here for real (bin/localnode):
# distribution as the registry Deployment configures it (once the manager
# installed it), build steps as processes. Service names resolve through
# its proxy, as through cluster DNS: the manager measures the registry, the
# Function controller cleans it.
NLOG=$ROOT/.cluster/logs/localnode.log
log "starting the internal registry and the build runner (log: $NLOG)"
bin/localnode -namespace "$NS" >"$NLOG" 2>&1 &
NODE=$!
PROXY=
for _ in $(seq 1 60); do
  PROXY=$(sed -n 's/^.*Service names resolve through the proxy \(http:[^ ]*\)$/\1/p' "$NLOG" | tail -n 1)
  [ -n "$PROXY" ] && break
  kill -0 "$NODE" 2>/dev/null || { tail -n 30 "$NLOG"; log "localnode exited"; exit 1; }
  sleep 0.5
done
[ -n "$PROXY" ] || { tail -n 30 "$NLOG"; log "localnode started no proxy"; kill "$NODE"; exit 1; }

LOG=$ROOT/.cluster/logs/manager.log
log "starting the manager as ServiceAccount $NS/serverless-manager (log: $LOG)"
KUBECONFIG=$SA_KUBECONFIG HTTP_PROXY=$PROXY HTTPS_PROXY=$PROXY env "${RUNTIME_IMAGES[@]}" bin/manager --namespace="$NS" --leader-elect=false --log-format=console \
  --metrics-bind-address=127.0.0.1:18080 --health-probe-bind-address=127.0.0.1:18081 >"$LOG" 2>&1 &
MANAGER=$!
CONTROLLER=
stop_all() {
  log "stopping the Function controller, this machine's Pods and the manager"
  [ -n "$CONTROLLER" ] && kill "$CONTROLLER" 2>/dev/null
  [ -n "$NODE" ] && kill "$NODE" 2>/dev/null
  kill "$MANAGER" 2>/dev/null
  wait 2>/dev/null
}
trap 'stop_all; exit 0' INT TERM

log "applying config/samples/default-serverless-cr.yaml"
k apply -f config/samples/default-serverless-cr.yaml >/dev/null
for _ in $(seq 1 240); do
  kill -0 "$MANAGER" 2>/dev/null || { tail -n 30 "$LOG"; log "the manager exited"; stop_all; exit 1; }
  [ "$(k -n "$NS" get serverless default -o jsonpath='{.status.state}' 2>/dev/null)" = Ready ] && break
  sleep 0.5
done
k -n "$NS" get serverless default
state=$(k -n "$NS" get serverless default -o jsonpath='{.status.state}')
[ "$state" = Ready ] || { tail -n 30 "$LOG"; log "the Serverless CR is $state, not Ready"; stop_all; exit 1; }

# Wait until the runtime stand-ins are in the internal registry.
for _ in $(seq 1 120); do
  kill -0 "$NODE" 2>/dev/null || { tail -n 30 "$NLOG"; log "localnode exited"; stop_all; exit 1; }
  grep -q "pushed runtime stand-ins" "$NLOG" && break
  sleep 0.5
done
grep -q "pushed runtime stand-ins" "$NLOG" || { tail -n 30 "$NLOG"; log "the internal registry did not take the runtime stand-ins within 60s"; stop_all; exit 1; }

# The chart's Deployment serverless-ctrl-mngr has a simulated Pod here; run
# its container as a process instead: its env, its ConfigMap volume (kept in
# sync, so log level changes apply), its ServiceAccount, loopback ports.
CLOG=$ROOT/.cluster/logs/function-controller.log
log "starting the Function controller like its Deployment (log: $CLOG)"
bin/podrun -namespace "$NS" -deployment serverless-ctrl-mngr \
  -env "HTTP_PROXY=$PROXY" -env "HTTPS_PROXY=$PROXY" >"$CLOG" 2>&1 &
CONTROLLER=$!
health=
for _ in $(seq 1 120); do
  kill -0 "$CONTROLLER" 2>/dev/null || { tail -n 30 "$CLOG"; log "the Function controller exited"; stop_all; exit 1; }
  health=${health:-$(sed -n 's/^podrun: port health of serverless-ctrl-mngr listens on //p' "$CLOG" | tail -n 1)}
  [ -n "$health" ] && curl -fsS -o /dev/null "http://$health/readyz" 2>/dev/null && break
  sleep 0.5
done
curl -fsS -o /dev/null "http://$health/readyz" 2>/dev/null || { tail -n 30 "$CLOG"; log "the Function controller is not ready"; stop_all; exit 1; }

cat <<EOT

Serverless is Ready on the local cluster and the Function controller runs
(in $((SECONDS - START))s).

  export KUBECONFIG=$KUBECONFIG
  $KUBECTL -n $NS get serverless default -o yaml     # state, conditions, configuration in effect
  $KUBECTL -n $NS get deploy,svc,cm                  # what the manager installed

Create a Function and watch it build and run (ConfigurationReady, BuildReady,
Running). The sample's build runs for real on this machine: npm installs its
dependency, the image is pushed to the internal registry (a stand-in for the
runtime base, which cannot be pulled here); its Pods run on simulated nodes:

  $KUBECTL apply -f config/samples/function-sample.yaml
  $KUBECTL get functions -w
  $KUBECTL describe function hello                   # conditions and events
  $KUBECTL get jobs,deploy,svc -l serverless.kyma-project.io/function-name=hello

Logs:
  tail -f $LOG                  # the manager
  tail -f $NLOG                # the internal registry and builds (steps: .cluster/localnode/builds/)
  tail -f $CLOG   # the Function controller (metrics: http://$(sed -n 's/^podrun: port http-metrics of serverless-ctrl-mngr listens on //p' "$CLOG" | tail -n 1)/metrics)

They run in this terminal's background: Ctrl-C stops them.
\`make cluster-down\` stops the cluster and removes its state.
EOT
wait "$MANAGER"

#!/usr/bin/env bash
# make run: the local cluster, the manager running here as its own
# ServiceAccount, and the default Serverless CR, until Ready. Ctrl-C stops
# the manager; `make cluster-down` removes the cluster.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
KUBECTL=$ROOT/bin/assets/kubectl
NS=kyma-system
START=$SECONDS
log() { printf '[run %s +%3ds] %s\n' "$(date +%H:%M:%S)" $((SECONDS - START)) "$*" >&2; }

log "building the control plane and tools (cold: several minutes; a no-op when built)"
hack/tools.sh
log "building bin/manager"
"${MAKE:-make}" --no-print-directory build
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

LOG=$ROOT/.cluster/logs/manager.log
log "starting the manager as ServiceAccount $NS/serverless-manager (log: $LOG)"
KUBECONFIG=$SA_KUBECONFIG bin/manager --namespace="$NS" --leader-elect=false --log-format=console \
  --metrics-bind-address=127.0.0.1:18080 --health-probe-bind-address=127.0.0.1:18081 >"$LOG" 2>&1 &
MANAGER=$!
trap 'log "stopping the manager"; kill "$MANAGER" 2>/dev/null; wait "$MANAGER" 2>/dev/null; exit 0' INT TERM

log "applying config/samples/default-serverless-cr.yaml"
k apply -f config/samples/default-serverless-cr.yaml >/dev/null
for _ in $(seq 1 240); do
  kill -0 "$MANAGER" 2>/dev/null || { tail -n 30 "$LOG"; log "the manager exited"; exit 1; }
  [ "$(k -n "$NS" get serverless default -o jsonpath='{.status.state}' 2>/dev/null)" = Ready ] && break
  sleep 0.5
done
k -n "$NS" get serverless default
state=$(k -n "$NS" get serverless default -o jsonpath='{.status.state}')
[ "$state" = Ready ] || { tail -n 30 "$LOG"; log "the Serverless CR is $state, not Ready"; kill "$MANAGER"; exit 1; }

cat <<EOT

Serverless is Ready on the local cluster (in $((SECONDS - START))s).

  export KUBECONFIG=$KUBECONFIG
  $KUBECTL -n $NS get serverless default -o yaml     # state, conditions, configuration in effect
  $KUBECTL -n $NS get deploy,svc,cm                  # what the manager installed
  $KUBECTL apply -f config/samples/function-sample.yaml
  tail -f $LOG                                        # the manager's log

The manager runs in this terminal's background: Ctrl-C stops it.
\`make cluster-down\` stops the cluster and removes its state.
EOT
wait "$MANAGER"

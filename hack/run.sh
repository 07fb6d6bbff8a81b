#!/usr/bin/env bash
# make run: the local cluster with its real node, the module's images built
# here and loaded into it, the manager installed as Kyma installs it (the
# install YAML of `make render`, its Deployment on the real node) and the
# default Serverless CR until Ready: the Function controller and the
# internal registry then run as the chart's Pods. Prints how to create a
# Function, watch it build and call it, and returns. The cluster keeps
# running (Ctrl-C stops only a cluster that is still starting: hack/cluster.sh
# up undoes a start that did not finish); `make cluster-down` removes it.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
KUBECTL=$ROOT/bin/assets/kubectl
NS=kyma-system
START=$SECONDS
log() { printf '[run %s +%3ds] %s\n' "$(date +%H:%M:%S)" $((SECONDS - START)) "$*" >&2; }

log "building the cluster's tools (cold: several minutes; a no-op when built)"
hack/tools.sh
log "building the images: the module's and the local runtimes (make image)"
"${MAKE:-make}" --no-print-directory image >/dev/null
log "starting the local cluster"
hack/cluster.sh up
log "loading the images into the real node's registry"
hack/cluster.sh load
export KUBECONFIG=$ROOT/.cluster/kubeconfig
k() { "$KUBECTL" "$@"; }

# The chart's runtime, registry and init images are published where this
# machine cannot pull from: the manager points its image keys at the local
# stand-ins (IMAGE_<KEY>), as at a mirror.
ENV=()
while IFS= read -r kv; do ENV+=(-env "$kv"); done < <(hack/cluster.sh manager-env)

log "installing the manager (make render) into $NS"
k create namespace "$NS" --dry-run=client -o yaml | k apply -f - >/dev/null
go run ./hack/render "${ENV[@]}" | k apply --server-side --force-conflicts --field-manager=make-run -f - >/dev/null
if ! k -n "$NS" rollout status deployment/serverless-manager --timeout=180s; then
  k -n "$NS" describe pods -l app.kubernetes.io/name=serverless-manager | tail -n 30
  log "the manager's Deployment did not become available"
  exit 1
fi

# The real node is this machine (2 CPUs here): Functions and builds ask
# for little (the default presets are sized for a Kyma cluster's nodes).
log "applying config/samples/small-cluster-serverless-cr.yaml"
k apply -f config/samples/small-cluster-serverless-cr.yaml >/dev/null
if ! k -n "$NS" wait serverless/default --for=jsonpath='{.status.state}'=Ready --timeout=300s; then
  k -n "$NS" get serverless default -o yaml | sed -n '/^status:/,$p'
  k -n "$NS" get pods -o wide
  log "the Serverless CR did not become Ready"
  exit 1
fi
k -n "$NS" get serverless default
k -n "$NS" get pods -o wide

cat <<EOT

Serverless is Ready on the local cluster (in $((SECONDS - START))s): the manager,
the Function controller and the internal registry run as Pods on the real
node $(hack/cluster.sh setting NODE_NAME).

  export KUBECONFIG=$KUBECONFIG
  $KUBECTL -n $NS get serverless default -o yaml     # state, conditions, configuration in effect
  $KUBECTL -n $NS get deploy,svc,pods                # what the manager installed

Create a Function, watch it build and run (ConfigurationReady, BuildReady,
Running: its build Pod installs the npm dependency and pushes the image to
the internal registry, from which the node pulls it), then call it:

  $KUBECTL apply -f config/samples/function-sample.yaml
  $KUBECTL get functions -w
  curl http://\$($KUBECTL get service hello -o jsonpath='{.spec.clusterIP}')/
  $KUBECTL describe function hello                   # conditions and events

The Function's log (its Deployment is named hello-<suffix>: select its Pods
by their labels):

  $KUBECTL logs -l serverless.kyma-project.io/function-name=hello,serverless.kyma-project.io/resource=deployment

Logs:
  $KUBECTL -n $NS logs deployment/serverless-manager -f
  $KUBECTL -n $NS logs deployment/serverless-ctrl-mngr -f

The cluster keeps running after this script returns, or when it is
interrupted after the cluster started; \`make cluster-down\` stops it and
removes its state.
EOT

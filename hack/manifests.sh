#!/usr/bin/env bash
# Generates the CRDs from the API types and each ClusterRole of the module
# from the +kubebuilder:rbac markers of the package that needs it, under the
# directory given (default: the repo):
#   config/crd/bases/                the Serverless CRD (the manager's manifest)
#   charts/serverless/crds/          the Function CRD (the chart's)
#   config/rbac/role.yaml            the manager (cluster-wide rules)
#   config/rbac/role_namespaced.yaml the manager in the module namespace
#                                    (markers in scope/namespaced only)
#   charts/serverless/files/function-controller-rbac/role.yaml
#                                    the Function controller
#   charts/serverless/files/activator-rbac/role.yaml
#                                    the activator
# `make manifests` and the staleness tests both run this, so they agree.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT}
GEN=$ROOT/bin/assets/controller-gen
cd "$ROOT"

"$GEN" crd paths=./operator/api/v1alpha1/... output:crd:artifacts:config="$OUT/config/crd/bases"
"$GEN" crd paths=./operator/api/function/... output:crd:artifacts:config="$OUT/charts/serverless/crds"
manager_pkgs=$(go list ./operator/cmd/manager/... ./operator/internal/manager/... | grep -v '/scope/namespaced$' | paste -sd';')
"$GEN" rbac:roleName=serverless-manager paths="$manager_pkgs" output:rbac:artifacts:config="$OUT/config/rbac"
"$GEN" rbac:roleName=serverless-manager-namespaced,fileName=role_namespaced.yaml \
  paths=./operator/internal/manager/scope/namespaced output:rbac:artifacts:config="$OUT/config/rbac"
"$GEN" rbac:roleName=serverless paths="./operator/cmd/function-controller/...;./operator/internal/function/..." \
  output:rbac:artifacts:config="$OUT/charts/serverless/files/function-controller-rbac"
"$GEN" rbac:roleName=serverless-activator paths="./operator/cmd/activator/...;./operator/internal/activator/..." \
  output:rbac:artifacts:config="$OUT/charts/serverless/files/activator-rbac"

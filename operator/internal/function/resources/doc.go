// Package resources builds, without any client, every object the Function
// controller derives from a Function: source ConfigMap, build Job,
// Deployment, Service and HorizontalPodAutoscaler, the image reference and
// the comparisons that decide whether a live object needs an update.
//
// The objects reproduce what the published 1.8.4 controller creates
// (docs/contributor/upstream-contract.md#build-mode-184) closely enough that
// Functions it built are adopted without a rebuild (same image tag) and without
// a rollout (same Pod template after API defaulting). Where this package
// deviates from 1.8.4 a comment says how
// (docs/contributor/upstream-contract.md#where-we-differ-from-184).
//
// Buildless mode (buildless.go, buildless_update.go) builds release 1.13's
// Deployment and Service instead, equal in every field 1.13 compares, and
// the comparison that decides whether to write.
package resources

import (
	"time"

	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// Fixed values of the children (1.8.4's).
const (
	// ContainerFunction names the Function's container, ContainerExecutor
	// the kaniko container of 1.8.4's build Jobs; 1.8.4's names.
	ContainerFunction    = "function"
	ContainerExecutor    = "executor"
	ContainerRepoFetcher = "repo-fetcher"
	// The steps of our build Job (BuildJob).
	ContainerPrepare      = "prepare"
	ContainerDependencies = "dependencies"
	ContainerBuild        = "build"

	// FunctionPort is where the runtime listens; ServicePort is what the Service exposes.
	FunctionPort = scaletozero.RuntimePort
	ServicePort  = 80

	// JobTTL removes finished build Jobs; the build result is remembered in the
	// Function status (status.builtImage), not by keeping the Job as 1.8.4 does.
	JobTTL = 24 * time.Hour
	// JobDeadline fails a build that cannot finish, e.g. a Pod stuck Pending,
	// so it frees its build slot (1.8.4 set no deadline).
	JobDeadline = 30 * time.Minute

	// AnnotationPodAnnotationKeys, on the Deployment's metadata, lists (sorted,
	// comma separated) the spec.annotations keys this controller put on the Pod
	// template, so that a key removed from spec.annotations is removed from the
	// template while annotations set by others are kept (1.8.4 kept removed
	// keys). Absent on
	// Deployments created by 1.8.4: then no key is known to be ours.
	AnnotationPodAnnotationKeys = "serverless.kyma-project.io/function-annotations"

	// LabelAppName is set on Pod templates to the Function name.
	LabelAppName = "app.kubernetes.io/name"

	// AnnotationIstioProxyConfig is set on every Function Pod template, value
	// byte-for-byte as 1.8.4 writes it (a different spelling would roll Pods).
	AnnotationIstioProxyConfig = "proxy.istio.io/config"
	IstioProxyConfig           = `{ "holdApplicationUntilProxyStarts": true }`
	// AnnotationIstioNativeSidecar is dropped from the template unless
	// spec.annotations sets it (1.8.4).
	AnnotationIstioNativeSidecar = "sidecar.istio.io/nativeSidecar"
	// AnnotationIstioInject "false" keeps the mesh out of build Pods.
	AnnotationIstioInject = "sidecar.istio.io/inject"
)

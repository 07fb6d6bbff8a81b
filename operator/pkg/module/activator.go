package module

import "time"

// EndpointSettle is how long a change of a Service's endpoints is given to
// reach every node's proxy: nothing signals that every node applied it. A
// drain waits for it before its first scrape (the nodes send new requests
// to the activator by then); a stopping activator replica keeps serving for
// it after the last slice that listed its address dropped it.
const EndpointSettle = 10 * time.Second

// Names the Function controller and the activator agree on for Functions
// that scale to zero (docs/contributor/scale-to-zero.md). The chart renders
// the activator's objects under these names; the controller reads the
// activator Service's EndpointSlices to point a parked Function's Service at
// the activator's Pods.
const (
	// ActivatorServiceName is the activator's ClusterIP Service in the module
	// namespace. Its EndpointSlices list the activator Pods that are ready.
	ActivatorServiceName = "serverless-activator"
	// ActivatorLeaseName is the Lease the activator replicas elect a leader
	// with; only the leader scales idle Functions to zero.
	ActivatorLeaseName = "serverless-activator"
	// ActivatorSliceManagedBy is the value of the label
	// endpointslice.kubernetes.io/managed-by on the EndpointSlice the
	// Function controller gives each scale-to-zero Function's Service. The
	// cluster's EndpointSlice controller leaves slices with another value alone.
	ActivatorSliceManagedBy = "activator.serverless.kyma-project.io"
	// ActivatorSliceSuffix names that slice: <service name><suffix>.
	ActivatorSliceSuffix = "-activator"
	// ActivatorPortFirst and ActivatorPortLast bound the activator ports a
	// scale-to-zero Function can be given, one per Function for its life.
	// The activator listens on the port of every such slice.
	ActivatorPortFirst = 20000
	ActivatorPortLast  = 29999
	// ActivatorReasonHeader names, on the activator's 503 answers, why a held
	// request could not be served (WakeFailed, StartFailed, WakeTimeout), for
	// clients that branch on it.
	ActivatorReasonHeader = "X-Serverless-Activator-Reason"
)

// Activator holds requests for Functions at zero, wakes them, and (its
// leader) scales idle ones to zero. It runs as 2 replicas of the chart's
// Deployment serverless-activator.
func Activator() Identity {
	return Identity{
		Name: "serverless-activator", ServiceAccount: "serverless-activator",
		Binary: "activator", Package: "./operator/cmd/activator",
		MetricsPort: 8080, HealthPort: 8081,
	}
}

package values

// Defaults of the Serverless spec; they match the Function controller's
// published chart defaults.
import "github.com/kyma-project/serverless-manager/operator/pkg/buildflags"

const (
	DefaultTargetCPUUtilizationPercentage   = 50
	DefaultFunctionRequeueDuration          = "5m"
	DefaultFunctionBuildExecutorArgs        = buildflags.Default
	DefaultFunctionBuildMaxSimultaneousJobs = 5
	DefaultHealthzLivenessTimeout           = "10s"
	DefaultLogLevel                         = "info"
	DefaultLogFormat                        = "json"
	DefaultRegistryNodePort                 = 32137
	// FallbackRegistryAddress is used for push and pull when neither the
	// internal registry nor a registry Secret is configured (k3d setups).
	FallbackRegistryAddress = "k3d-kyma-registry:5000"
	// InternalRegistry is what the status shows for the internal registry.
	InternalRegistry = "internal"
	// SmallClusterNodes is the node count up to which the small presets apply.
	SmallClusterNodes = 2
)

// DefaultEventingEndpoint is Kyma's eventing publisher proxy.
const DefaultEventingEndpoint = "http://eventing-publisher-proxy.kyma-system.svc.cluster.local/publish"

// TracingServiceName is the Service of Kyma's telemetry module that receives
// OTLP traces; when it exists in the module namespace, Functions use it.
const TracingServiceName = "telemetry-otlp-traces"

// TracingEndpoint is the OTLP/HTTP traces URL of the telemetry Service in namespace.
func TracingEndpoint(namespace string) string {
	return "http://" + TracingServiceName + "." + namespace + ".svc.cluster.local:4318/v1/traces"
}

// DefaultPresets returns the build Job and Function Pod presets for a cluster
// with the given number of nodes: small ones for small clusters.
func DefaultPresets(nodes int) (buildJob, runtimePod string) {
	if nodes <= SmallClusterNodes {
		return "slow", "XS"
	}
	return "normal", "L"
}

// Package values turns a Serverless spec plus facts about the cluster into
// typed values for the Serverless chart, and reports the configuration in
// effect. Values are Go types all the way to the Helm engine: nothing is
// parsed from key=value strings, so commas and numbers survive intact.
package values

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

// Values is the part of the chart's values the manager sets. Keys the
// manager leaves empty keep the chart's defaults.
type Values struct {
	// FunctionMode is v1alpha1.FunctionModeBuild or FunctionModeBuildless.
	FunctionMode    string         `json:"functionMode"`
	Global          Global         `json:"global"`
	DockerRegistry  DockerRegistry `json:"dockerRegistry"`
	Controller      Controller     `json:"controller"`
	NetworkPolicies Toggle         `json:"networkPolicies"`
	// Containers holds the FIPS switch under release 1.13's key.
	Containers Containers `json:"containers"`
	// Activator is set only in mesh mode: without it the chart's defaults
	// render as before.
	Activator *Activator `json:"activator,omitempty"`
}

// Activator is the part of the chart's values.activator the manager sets.
type Activator struct {
	// Mesh is spec.scaleToZero.mesh: v1alpha1.MeshIstio runs the activator
	// with an Istio sidecar, and the Function controller gives each
	// scale-to-zero Function the headless Service the sidecar routes by.
	Mesh string `json:"mesh"`
}

// Containers is release 1.13's values.containers, of which the module has
// only the FIPS switch (docs/contributor/fips.md).
type Containers struct {
	Manager ManagerContainer `json:"manager"`
}

// ManagerContainer is 1.13's values.containers.manager.
type ManagerContainer struct {
	// FipsModeEnabled runs every module binary with GODEBUG=fips140=only
	// and their FIPS runtime images (1.13's containers.manager.fipsModeEnabled).
	FipsModeEnabled bool `json:"fipsModeEnabled"`
}

// Global values shared by all templates.
type Global struct {
	// Images overrides chart images one by one, keyed like global.images.
	Images map[string]Image `json:"images,omitempty"`
	// RegistryNodePort of the internal registry's Service and pull address.
	RegistryNodePort int32 `json:"registryNodePort"`
}

// Image overrides one image with a full reference.
type Image struct {
	Image string `json:"image"`
}

// DockerRegistry selects and describes the registry.
type DockerRegistry struct {
	EnableInternal  bool         `json:"enableInternal"`
	Username        string       `json:"username"`
	Password        string       `json:"password"`
	HTTPSecret      string       `json:"httpSecret,omitempty"`
	RegistryAddress string       `json:"registryAddress,omitempty"`
	ServerAddress   string       `json:"serverAddress,omitempty"`
	Persistence     *Persistence `json:"persistence,omitempty"`
}

// Persistence of the internal registry.
type Persistence struct {
	Size string `json:"size"`
}

// Controller configures the Function controller.
type Controller struct {
	LogLevel               string                 `json:"logLevel"`
	LogFormat              string                 `json:"logFormat"`
	Configuration          Configuration          `json:"configuration"`
	ResourcesConfiguration ResourcesConfiguration `json:"resourcesConfiguration"`
}

// Configuration of the Function controller (its APP_* settings).
type Configuration struct {
	TargetCPUUtilizationPercentage   int32  `json:"targetCPUUtilizationPercentage"`
	FunctionRequeueDuration          string `json:"functionRequeueDuration"`
	FunctionBuildExecutorArgs        string `json:"functionBuildExecutorArgs"`
	FunctionBuildMaxSimultaneousJobs int32  `json:"functionBuildMaxSimultaneousJobs"`
	HealthzLivenessTimeout           string `json:"healthzLivenessTimeout"`
	FunctionTraceCollectorEndpoint   string `json:"functionTraceCollectorEndpoint"`
	FunctionPublisherProxyAddress    string `json:"functionPublisherProxyAddress"`
	// DeleteUnusedExternalImages: the controller cleans the external
	// registry too (spec.dockerRegistry.deleteUnusedExternalImages; unset:
	// the chart's false, which charts before it know nothing of).
	DeleteUnusedExternalImages bool `json:"deleteUnusedExternalImages,omitempty"`
}

// ResourcesConfiguration picks the default presets; the presets themselves
// stay the chart's.
type ResourcesConfiguration struct {
	Function PresetChoice `json:"function"`
	BuildJob PresetChoice `json:"buildJob"`
}

// PresetChoice wraps the default preset the way the chart nests it.
type PresetChoice struct {
	Resources DefaultPreset `json:"resources"`
}

// DefaultPreset names the preset used when a Function names none.
type DefaultPreset struct {
	DefaultPreset string `json:"defaultPreset"`
}

// Toggle is an enabled flag.
type Toggle struct {
	Enabled bool `json:"enabled"`
}

// Map converts the values to the generic form the Helm engine takes.
// Integers stay integers (int64), strings stay exactly as they are.
func (v Values) Map() (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v)
	if err != nil {
		return nil, fmt.Errorf("converting values: %w", err)
	}
	return m, nil
}

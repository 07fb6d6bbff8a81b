package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// ResourceConfig is APP_FUNCTION_RESOURCE_CONFIG: the presets of Function
// Pods (container "function") and of build Jobs (container "executor").
type ResourceConfig struct {
	Function Presets
	BuildJob Presets
}

// Presets is one `<function|buildJob>.resources` block
// (docs/contributor/upstream-contract.md#resource-presets). The JSON names are
// the YAML keys the chart writes.
type Presets struct {
	// Presets by name, for every runtime without an entry in RuntimePresets.
	Presets map[string]Preset `json:"presets,omitempty"`
	// RuntimePresets replace (never merge with) Presets for their runtime.
	RuntimePresets map[string]map[string]Preset `json:"runtimePresets,omitempty"`
	// DefaultPreset applies when a Function names no usable preset and gives no resources.
	DefaultPreset string `json:"defaultPreset,omitempty"`
	// MinRequestedCPU and MinRequestedMemory bound custom resources (CheckCustom); zero = no bound.
	MinRequestedCPU    resource.Quantity `json:"minRequestedCPU"`
	MinRequestedMemory resource.Quantity `json:"minRequestedMemory"`
}

// Preset is one named size. A quantity left out stays unset in the Pod
// (1.8.4 turned it into 0, which for a limit means "no CPU at all").
type Preset struct {
	RequestCPU    *resource.Quantity `json:"requestCpu,omitempty"`
	RequestMemory *resource.Quantity `json:"requestMemory,omitempty"`
	LimitCPU      *resource.Quantity `json:"limitCpu,omitempty"`
	LimitMemory   *resource.Quantity `json:"limitMemory,omitempty"`
}

// resourceDocument is the YAML layout: an extra `resources` level per block.
type resourceDocument struct {
	Function struct {
		Resources Presets `json:"resources"`
	} `json:"function"`
	BuildJob struct {
		Resources Presets `json:"resources"`
	} `json:"buildJob"`
}

// ParseResourceConfig parses and checks the preset document. Unlike 1.8.4,
// which ignored unknown keys, an unknown key is an error: that silence is how
// the upstream chart's `minRequestCpu` disabled every minimum. Keys match
// case-insensitively (JSON decoding).
func ParseResourceConfig(data []byte) (ResourceConfig, error) {
	var doc resourceDocument
	if err := yaml.UnmarshalStrict(data, &doc); err != nil {
		return ResourceConfig{}, fmt.Errorf("parsing the preset YAML: %w", err)
	}
	rc := ResourceConfig{Function: doc.Function.Resources, BuildJob: doc.BuildJob.Resources}
	if err := errors.Join(rc.Function.validate("function.resources"), rc.BuildJob.validate("buildJob.resources")); err != nil {
		return ResourceConfig{}, err
	}
	return rc, nil
}

// validate rejects what would only fail later, in every Pod: negative
// quantities, requests above limits, presets for a runtime that does not exist.
func (p Presets) validate(path string) error {
	var errs []error
	for _, m := range []struct {
		key string
		q   resource.Quantity
	}{{"minRequestedCPU", p.MinRequestedCPU}, {"minRequestedMemory", p.MinRequestedMemory}} {
		if m.q.Sign() < 0 {
			errs = append(errs, fmt.Errorf("%s.%s: %s is negative", path, m.key, m.q.String()))
		}
	}
	errs = append(errs, validatePresets(path+".presets", p.Presets)...)
	for _, rt := range slices.Sorted(maps.Keys(p.RuntimePresets)) {
		if !slices.Contains(v1alpha2.Runtimes(), v1alpha2.Runtime(rt)) {
			errs = append(errs, fmt.Errorf("%s.runtimePresets.%s: unknown runtime (known: %v)", path, rt, v1alpha2.Runtimes()))
			continue
		}
		errs = append(errs, validatePresets(path+".runtimePresets."+rt, p.RuntimePresets[rt])...)
	}
	return errors.Join(errs...)
}

func validatePresets(path string, presets map[string]Preset) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(presets)) {
		if err := presets[name].validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", path, name, err))
		}
	}
	return errs
}

func (p Preset) validate() error {
	var errs []error
	for _, q := range []struct {
		key string
		q   *resource.Quantity
	}{{"requestCpu", p.RequestCPU}, {"requestMemory", p.RequestMemory}, {"limitCpu", p.LimitCPU}, {"limitMemory", p.LimitMemory}} {
		if q.q != nil && q.q.Sign() < 0 {
			errs = append(errs, fmt.Errorf("%s %s is negative", q.key, q.q.String()))
		}
	}
	if p.RequestCPU != nil && p.LimitCPU != nil && p.RequestCPU.Cmp(*p.LimitCPU) > 0 {
		errs = append(errs, fmt.Errorf("requestCpu %s is above limitCpu %s", p.RequestCPU.String(), p.LimitCPU.String()))
	}
	if p.RequestMemory != nil && p.LimitMemory != nil && p.RequestMemory.Cmp(*p.LimitMemory) > 0 {
		errs = append(errs, fmt.Errorf("requestMemory %s is above limitMemory %s", p.RequestMemory.String(), p.LimitMemory.String()))
	}
	return errors.Join(errs...)
}

// Resources is the preset as Pod resources; quantities left out stay unset,
// and a list with nothing set stays nil.
func (p Preset) Resources() corev1.ResourceRequirements {
	set := func(list corev1.ResourceList, name corev1.ResourceName, q *resource.Quantity) corev1.ResourceList {
		if q == nil {
			return list
		}
		if list == nil {
			list = corev1.ResourceList{}
		}
		list[name] = q.DeepCopy()
		return list
	}
	var out corev1.ResourceRequirements
	out.Requests = set(out.Requests, corev1.ResourceCPU, p.RequestCPU)
	out.Requests = set(out.Requests, corev1.ResourceMemory, p.RequestMemory)
	out.Limits = set(out.Limits, corev1.ResourceCPU, p.LimitCPU)
	out.Limits = set(out.Limits, corev1.ResourceMemory, p.LimitMemory)
	return out
}

package config

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// ProfileCustom is the profile name in the status when a Function's own
// resources are used.
const ProfileCustom = "custom"

// Resolve picks a Function's (or its build's) resources for runtime from
// req (spec.resourceConfiguration.function or .build, nil when absent) —
// as 1.8.4 does (docs/contributor/upstream-contract.md#resolving-resources):
//   - the preset map is RuntimePresets[runtime] when present, else Presets;
//   - a profile found in that map wins;
//   - else req.Resources are used verbatim, profile "custom";
//   - else DefaultPreset; an unknown default gives empty resources and profile "".
//
// The profile is the name of what was applied: when a requested profile is
// missing and the default applies, 1.8.4 showed the requested name, which
// told the user a size the Pods do not have; this shows the default's name.
func (p Presets) Resolve(runtime v1alpha2.Runtime, req *v1alpha2.ResourceRequirements) (corev1.ResourceRequirements, string) {
	presets := p.presetsFor(runtime)
	if req != nil {
		if preset, ok := presets[req.Profile]; ok && req.Profile != "" {
			return preset.Resources(), req.Profile
		}
		if req.Resources != nil {
			return *req.Resources.DeepCopy(), ProfileCustom
		}
	}
	if preset, ok := presets[p.DefaultPreset]; ok && p.DefaultPreset != "" {
		return preset.Resources(), p.DefaultPreset
	}
	return corev1.ResourceRequirements{}, ""
}

func (p Presets) presetsFor(runtime v1alpha2.Runtime) map[string]Preset {
	if m, ok := p.RuntimePresets[string(runtime)]; ok {
		return m
	}
	return p.Presets
}

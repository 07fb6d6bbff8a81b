package resources

import (
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// BuildlessChange is what differs between a live Deployment and the
// desired buildless one, in exactly the fields release 1.13 compares
// (docs/contributor/upstream-contract.md#what-rolls-buildless-pods).
type BuildlessChange struct {
	// Template: a field of the Pod template differs; writing it rolls the Pods.
	Template bool
	// Field names the first template field found to differ (for the log).
	Field string
	// Replicas: spec.replicas differs; writing it only scales.
	Replicas bool
}

// Any tells whether the Deployment needs a write.
func (c BuildlessChange) Any() bool { return c.Template || c.Replicas }

// CompareBuildless compares live with desired where 1.13 does: the Pod
// template's labels and annotations (exact), the function container's
// image, workingDir, command, env, volumeMounts, ports, cpu and memory
// (as quantities, absent = 0) and security context, the Pod's security
// context, and the init container (none, or one with the same image,
// workingDir, command, env and volumeMounts); and replicas. Fields the API
// server defaults are equal to their default (env fieldRef apiVersion "v1",
// fileKeyRef optional false, a port's protocol TCP, procMount Default, and
// procMount dropped by a server without that feature), where 1.13 would
// update on every pass.
func CompareBuildless(live, desired *appsv1.Deployment) BuildlessChange {
	field := buildlessTemplateDiff(&live.Spec.Template, &desired.Spec.Template)
	return BuildlessChange{
		Template: field != "",
		Field:    field,
		Replicas: !ptr.Equal(live.Spec.Replicas, desired.Spec.Replicas),
	}
}

// UpdateBuildlessDeployment returns live with what differs replaced, and
// the change, or (nil, change) when nothing differs. A template change
// replaces the whole template and replicas, as 1.13 does, so fields it
// does not compare (probes, volumes, service account, …) come along; a
// replicas-only change leaves the template alone (1.13 would replace it
// too, and roll Pods whose uncompared fields differ).
func UpdateBuildlessDeployment(live, desired *appsv1.Deployment) (*appsv1.Deployment, BuildlessChange) {
	change := CompareBuildless(live, desired)
	if !change.Any() {
		return nil, change
	}
	out := live.DeepCopy()
	out.Spec.Replicas = ptr.To(ptr.Deref(desired.Spec.Replicas, 1))
	if change.Template {
		out.Spec.Template = *desired.Spec.Template.DeepCopy()
	}
	return out, change
}

// buildlessTemplateDiff names the first compared field that differs, "" for none.
func buildlessTemplateDiff(live, desired *corev1.PodTemplateSpec) string {
	switch {
	case !maps.Equal(live.Labels, desired.Labels):
		return "labels"
	case !maps.Equal(live.Annotations, desired.Annotations):
		return "annotations"
	}
	l, d := &live.Spec, &desired.Spec
	if len(l.Containers) != 1 || len(d.Containers) != 1 {
		return "containers"
	}
	lc, dc := &l.Containers[0], &d.Containers[0]
	if f := containerDiff(lc, dc); f != "" {
		return "container " + f
	}
	switch {
	case !slices.EqualFunc(lc.Ports, dc.Ports, samePort):
		return "container ports"
	case !sameResources(lc.Resources, dc.Resources):
		return "container resources"
	case !sameContainerSecurityContext(lc.SecurityContext, dc.SecurityContext):
		return "container securityContext"
	case !equality.Semantic.DeepEqual(l.SecurityContext, d.SecurityContext):
		return "securityContext"
	case len(l.InitContainers) > 1 || len(d.InitContainers) > 1 || len(l.InitContainers) != len(d.InitContainers):
		return "initContainers"
	case len(d.InitContainers) == 1:
		if f := containerDiff(&l.InitContainers[0], &d.InitContainers[0]); f != "" {
			return "initContainer " + f
		}
	}
	return ""
}

// containerDiff names what 1.13 compares of both containers that differs.
func containerDiff(live, desired *corev1.Container) string {
	switch {
	case live.Image != desired.Image:
		return "image"
	case live.WorkingDir != desired.WorkingDir:
		return "workingDir"
	case !slices.Equal(live.Command, desired.Command):
		return "command"
	case !equality.Semantic.DeepEqual(defaultedEnv(live.Env), defaultedEnv(desired.Env)):
		return "env"
	case !equality.Semantic.DeepEqual(live.VolumeMounts, desired.VolumeMounts):
		return "volumeMounts"
	}
	return ""
}

// defaultedEnv is env as the API server stores it: a fieldRef without
// apiVersion means "v1", a fileKeyRef without optional means false.
func defaultedEnv(env []corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for i, e := range env {
		from := e.ValueFrom
		fieldRef := from != nil && from.FieldRef != nil && from.FieldRef.APIVersion == ""
		fileKeyRef := from != nil && from.FileKeyRef != nil && from.FileKeyRef.Optional == nil
		if !fieldRef && !fileKeyRef {
			continue
		}
		if out == nil {
			out = slices.Clone(env)
		}
		out[i] = *e.DeepCopy()
		if fieldRef {
			out[i].ValueFrom.FieldRef.APIVersion = "v1"
		}
		if fileKeyRef {
			out[i].ValueFrom.FileKeyRef.Optional = ptr.To(false)
		}
	}
	if out == nil {
		return env
	}
	return out
}

func samePort(live, desired corev1.ContainerPort) bool {
	live.Protocol, desired.Protocol = protocol(live.Protocol), protocol(desired.Protocol)
	return live == desired
}

// sameResources compares cpu and memory requests and limits as
// quantities; an absent one is zero (1.13's comparison).
func sameResources(live, desired corev1.ResourceRequirements) bool {
	return live.Requests.Cpu().Equal(*desired.Requests.Cpu()) &&
		live.Requests.Memory().Equal(*desired.Requests.Memory()) &&
		live.Limits.Cpu().Equal(*desired.Limits.Cpu()) &&
		live.Limits.Memory().Equal(*desired.Limits.Memory())
}

// sameContainerSecurityContext compares exactly, except procMount: unset is
// Default, and a live template without one (a server without the
// ProcMountType feature drops it) matches any.
func sameContainerSecurityContext(live, desired *corev1.SecurityContext) bool {
	if live == nil || desired == nil {
		return live == nil && desired == nil
	}
	l, d := live.DeepCopy(), desired.DeepCopy()
	if l.ProcMount == nil {
		d.ProcMount = nil
	} else if d.ProcMount == nil {
		d.ProcMount = ptr.To(corev1.DefaultProcMount)
	}
	return equality.Semantic.DeepEqual(l, d)
}

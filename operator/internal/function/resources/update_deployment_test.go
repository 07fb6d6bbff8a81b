package resources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// stored imitates what the API server keeps of a created Deployment: a
// name, the defaults it fills in, quantities in canonical form and the
// revision annotation of the Deployment controller. (The envtest test
// checks the same against a real API server.)
func stored(desired *appsv1.Deployment) *appsv1.Deployment {
	d := desired.DeepCopy()
	d.Name = d.GenerateName + "rhxmt"
	d.ResourceVersion = "42"
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations["deployment.kubernetes.io/revision"] = "1"
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromString("25%"))}}
	pod := &d.Spec.Template.Spec
	pod.RestartPolicy = corev1.RestartPolicyAlways
	pod.DNSPolicy = corev1.DNSClusterFirst
	pod.SchedulerName = corev1.DefaultSchedulerName
	pod.TerminationGracePeriodSeconds = ptr.To[int64](30)
	pod.DeprecatedServiceAccount = pod.ServiceAccountName
	for i := range pod.Containers {
		c := &pod.Containers[i]
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
			if p == nil {
				continue
			}
			p.HTTPGet.Scheme = corev1.URISchemeHTTP
			if p.TimeoutSeconds == 0 {
				p.TimeoutSeconds = 1
			}
			if p.SuccessThreshold == 0 {
				p.SuccessThreshold = 1
			}
		}
		for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for name, q := range list {
				list[name] = resource.MustParse(q.String())
			}
		}
	}
	return d
}

// withSecurityContexts sets both of release 1.13's security context fields.
func withSecurityContexts(fn *v1alpha2.Function) {
	fn.Spec.PodSecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}
	fn.Spec.ContainerSecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)}
}

func TestUpdateDeployment(t *testing.T) {
	build := func(mutate ...func(*v1alpha2.Function)) *appsv1.Deployment {
		return Deployment(inputs(newFunction(v1alpha2.RuntimePython312, append([]func(*v1alpha2.Function){func(fn *v1alpha2.Function) {
			fn.Spec.Annotations = map[string]string{"team.example.com/owner": "a"}
			fn.Spec.Env = []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
			fn.Spec.SecretMounts = []v1alpha2.SecretMount{{SecretName: "db-creds", MountPath: "/db"}}
		}}, mutate...)...)))
	}
	base := build()
	restartedAt := func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = "2026-11-23T10:00:00Z"
	}

	tests := []struct {
		name    string
		live    func() *appsv1.Deployment
		desired *appsv1.Deployment
		// update: an update is expected; templateKept: its Pod template equals live's.
		update, templateKept bool
		check                func(t *testing.T, got *appsv1.Deployment)
	}{
		{name: "stored copy of desired: no-op", live: func() *appsv1.Deployment { return stored(base) }, desired: base},
		{name: "API server dropped procMount: no-op", live: func() *appsv1.Deployment {
			d := stored(base)
			d.Spec.Template.Spec.Containers[0].SecurityContext.ProcMount = nil
			return d
		}, desired: base},
		{name: "foreign template annotation alone: no-op", live: func() *appsv1.Deployment {
			d := stored(base)
			restartedAt(d)
			return d
		}, desired: base},
		{name: "env value changed: update, foreign annotation kept", live: func() *appsv1.Deployment {
			d := stored(base)
			restartedAt(d)
			return d
		}, desired: build(func(fn *v1alpha2.Function) { fn.Spec.Env = append(fn.Spec.Env, corev1.EnvVar{Name: "X", Value: "1"}) }),
			update: true, check: func(t *testing.T, got *appsv1.Deployment) {
				env := got.Spec.Template.Spec.Containers[0].Env
				assert.Equal(t, "X", env[1].Name)
				assert.Equal(t, "2026-11-23T10:00:00Z", got.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"])
				assert.Equal(t, "a", got.Spec.Template.Annotations["team.example.com/owner"])
				assert.Equal(t, "1", got.Annotations["deployment.kubernetes.io/revision"])
				assert.Equal(t, "rhxmt", got.Name[len(got.Name)-5:], "live identity kept")
				assert.Equal(t, "42", got.ResourceVersion)
			}},
		{name: "trace endpoint set in config: update", live: func() *appsv1.Deployment { return stored(base) },
			desired: func() *appsv1.Deployment {
				in := inputs(newFunction(v1alpha2.RuntimePython312, func(fn *v1alpha2.Function) {
					fn.Spec.Annotations = map[string]string{"team.example.com/owner": "a"}
					fn.Spec.Env = []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
					fn.Spec.SecretMounts = []v1alpha2.SecretMount{{SecretName: "db-creds", MountPath: "/db"}}
				}))
				in.Config.TraceCollectorEndpoint = "http://otel:4318"
				return Deployment(in)
			}(), update: true},
		{name: "replicas only: template untouched", live: func() *appsv1.Deployment {
			d := stored(base)
			restartedAt(d)
			return d
		}, desired: build(func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](3) }),
			update: true, templateKept: true, check: func(t *testing.T, got *appsv1.Deployment) {
				assert.Equal(t, int32(3), *got.Spec.Replicas)
			}},
		{name: "revisionHistoryLimit edited: template untouched", live: func() *appsv1.Deployment {
			d := stored(base)
			d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
			return d
		}, desired: base, update: true, templateKept: true, check: func(t *testing.T, got *appsv1.Deployment) {
			assert.Equal(t, int32(0), *got.Spec.RevisionHistoryLimit)
		}},
		{name: "Function label added: metadata only", live: func() *appsv1.Deployment { return stored(base) },
			desired: build(func(fn *v1alpha2.Function) { fn.Labels["new"] = "x" }),
			update:  true, templateKept: true, check: func(t *testing.T, got *appsv1.Deployment) {
				assert.Equal(t, "x", got.Labels["new"])
			}},
		{name: "removed spec.annotations key is removed", live: func() *appsv1.Deployment {
			d := stored(base)
			restartedAt(d)
			return d
		}, desired: build(func(fn *v1alpha2.Function) { fn.Spec.Annotations = nil }),
			update: true, check: func(t *testing.T, got *appsv1.Deployment) {
				assert.NotContains(t, got.Spec.Template.Annotations, "team.example.com/owner")
				assert.Equal(t, "2026-11-23T10:00:00Z", got.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"])
				assert.Equal(t, IstioProxyConfig, got.Spec.Template.Annotations[AnnotationIstioProxyConfig])
				assert.Equal(t, "", got.Annotations[AnnotationPodAnnotationKeys])
			}},
		{name: "changed spec.annotations value", live: func() *appsv1.Deployment { return stored(base) },
			desired: build(func(fn *v1alpha2.Function) { fn.Spec.Annotations["team.example.com/owner"] = "b" }),
			update:  true, check: func(t *testing.T, got *appsv1.Deployment) {
				assert.Equal(t, "b", got.Spec.Template.Annotations["team.example.com/owner"])
			}},
		{name: "adopted from 1.8.4 (no key record): no update of its own", live: func() *appsv1.Deployment {
			d := stored(base)
			delete(d.Annotations, AnnotationPodAnnotationKeys)
			return d
		}, desired: base},
		{name: "adopted from 1.8.4: the record comes with the next change", live: func() *appsv1.Deployment {
			d := stored(base)
			delete(d.Annotations, AnnotationPodAnnotationKeys)
			return d
		}, desired: build(func(fn *v1alpha2.Function) { fn.Labels["new"] = "x" }),
			update: true, templateKept: true, check: func(t *testing.T, got *appsv1.Deployment) {
				assert.Equal(t, "team.example.com/owner", got.Annotations[AnnotationPodAnnotationKeys])
			}},
		{name: "adopted: annotations of unknown origin are kept", live: func() *appsv1.Deployment {
			d := stored(base)
			delete(d.Annotations, AnnotationPodAnnotationKeys)
			d.Spec.Template.Annotations["old.example.com/k"] = "v"
			return d
		}, desired: build(func(fn *v1alpha2.Function) { fn.Spec.Env = nil }), update: true, check: func(t *testing.T, got *appsv1.Deployment) {
			assert.Equal(t, "v", got.Spec.Template.Annotations["old.example.com/k"])
		}},
		{name: "nativeSidecar dropped unless in spec.annotations (1.8.4)", live: func() *appsv1.Deployment {
			d := stored(base)
			d.Spec.Template.Annotations[AnnotationIstioNativeSidecar] = "true"
			return d
		}, desired: base, update: true, check: func(t *testing.T, got *appsv1.Deployment) {
			assert.NotContains(t, got.Spec.Template.Annotations, AnnotationIstioNativeSidecar)
		}},
		{name: "memory limit 1024Mi equals stored 1Gi: no-op", live: func() *appsv1.Deployment {
			d := stored(base)
			d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
			return d
		}, desired: base},
		{name: "cpu changed: update", live: func() *appsv1.Deployment {
			d := stored(base)
			d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("100m")
			return d
		}, desired: base, update: true},
		{name: "image changed: update", live: func() *appsv1.Deployment {
			d := stored(base)
			d.Spec.Template.Spec.Containers[0].Image = "elsewhere/img:1"
			return d
		}, desired: base, update: true, check: func(t *testing.T, got *appsv1.Deployment) {
			assert.Equal(t, base.Spec.Template.Spec.Containers[0].Image, got.Spec.Template.Spec.Containers[0].Image)
		}},
		{name: "env order changed: update", live: func() *appsv1.Deployment {
			d := stored(base)
			env := d.Spec.Template.Spec.Containers[0].Env
			env[0], env[1] = env[1], env[0]
			return d
		}, desired: base, update: true},
		{name: "probe edited by hand: update", live: func() *appsv1.Deployment {
			d := stored(base)
			d.Spec.Template.Spec.Containers[0].LivenessProbe.PeriodSeconds = 60
			return d
		}, desired: base, update: true},
		{name: "1.8.4's startup probe: no update", live: func() *appsv1.Deployment {
			d := stored(base)
			p := d.Spec.Template.Spec.Containers[0].StartupProbe
			p.PeriodSeconds, p.FailureThreshold = 5, 30
			return d
		}, desired: base, update: false},
		{name: "startup probe edited by hand: update", live: func() *appsv1.Deployment {
			d := stored(base)
			d.Spec.Template.Spec.Containers[0].StartupProbe.PeriodSeconds = 5
			return d
		}, desired: base, update: true},
		{name: "service account edited: update", live: func() *appsv1.Deployment {
			d := stored(base)
			d.Spec.Template.Spec.ServiceAccountName = "default"
			return d
		}, desired: base, update: true},
		{name: "secret mount removed: update", live: func() *appsv1.Deployment { return stored(base) },
			desired: build(func(fn *v1alpha2.Function) { fn.Spec.SecretMounts = nil }), update: true,
			check: func(t *testing.T, got *appsv1.Deployment) {
				assert.Len(t, got.Spec.Template.Spec.Volumes, 1)
				assert.Len(t, got.Spec.Template.Spec.Containers[0].VolumeMounts, 1)
			}},
		{name: "spec.labels changed: update", live: func() *appsv1.Deployment { return stored(base) },
			desired: build(func(fn *v1alpha2.Function) { fn.Spec.Labels = map[string]string{"tier": "x"} }), update: true,
			check: func(t *testing.T, got *appsv1.Deployment) {
				assert.Equal(t, "x", got.Spec.Template.Labels["tier"])
			}},
		{name: "pod security context set: update", live: func() *appsv1.Deployment { return stored(base) },
			desired: build(withSecurityContexts), update: true,
			check: func(t *testing.T, got *appsv1.Deployment) {
				assert.Equal(t, ptr.To[int64](2000), got.Spec.Template.Spec.SecurityContext.FSGroup)
				assert.Equal(t, ptr.To(true), got.Spec.Template.Spec.Containers[0].SecurityContext.RunAsNonRoot)
			}},
		{name: "security contexts unchanged: no-op", live: func() *appsv1.Deployment { return stored(build(withSecurityContexts)) },
			desired: build(withSecurityContexts)},
		{name: "security context field removed from the spec: update", live: func() *appsv1.Deployment { return stored(build(withSecurityContexts)) },
			desired: base, update: true,
			check: func(t *testing.T, got *appsv1.Deployment) {
				assert.Nil(t, got.Spec.Template.Spec.SecurityContext.FSGroup)
				assert.Nil(t, got.Spec.Template.Spec.Containers[0].SecurityContext.RunAsNonRoot)
			}},
		{name: "procMount set by the spec, dropped by the API server: no-op", live: func() *appsv1.Deployment {
			d := stored(build(withSecurityContexts))
			d.Spec.Template.Spec.Containers[0].SecurityContext.ProcMount = nil
			return d
		}, desired: build(withSecurityContexts)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := tt.live()
			before := live.DeepCopy()
			got, changed := UpdateDeployment(live, tt.desired)
			assert.Equal(t, before, live, "live must not be modified")
			if !tt.update {
				assert.False(t, changed)
				assert.Nil(t, got)
				return
			}
			require.True(t, changed)
			require.NotNil(t, got)
			if tt.templateKept {
				assert.Equal(t, live.Spec.Template, got.Spec.Template)
			} else {
				assert.NotEqual(t, live.Spec.Template, got.Spec.Template)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
			// Applying the update and comparing again must settle.
			again, changed := UpdateDeployment(stored(got), tt.desired)
			assert.False(t, changed, "second pass after the update must be a no-op")
			assert.Nil(t, again)
		})
	}
}

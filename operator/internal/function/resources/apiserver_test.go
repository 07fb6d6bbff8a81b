package resources

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// apiServer starts a real API server for the test (skipped with -short)
// and returns its client.
func apiServer(t *testing.T) client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an API server")
	}
	return testenv.Start(t).Client
}

// TestAPIServerRoundTrip creates every built object in a real API server and
// checks that (a) the server accepts it and (b) the update helpers see the
// stored, defaulted object as unchanged — otherwise the controller would
// write (or roll Pods) on every pass.
func TestAPIServerRoundTrip(t *testing.T) {
	c := apiServer(t)
	ctx := context.Background()
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fn-test-1"}}))

	functions := map[string]*v1alpha2.Function{
		"nodejs20 as in the dump": newFunction(v1alpha2.RuntimeNodejs20),
		"python312 with everything": newFunction(v1alpha2.RuntimePython312, func(fn *v1alpha2.Function) {
			fn.Name = "hello-py"
			fn.Spec.Replicas = ptr.To[int32](2)
			fn.Spec.Labels = map[string]string{"tier": "backend"}
			fn.Spec.Annotations = map[string]string{"team.example.com/owner": "a", AnnotationIstioNativeSidecar: "true"}
			fn.Spec.Env = []corev1.EnvVar{
				{Name: "PLAIN", Value: "v"},
				{Name: "EMPTY"},
				{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
				{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}},
				{Name: "CONF", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, Key: "k", Optional: ptr.To(true)}}},
			}
			fn.Spec.SecretMounts = []v1alpha2.SecretMount{
				{SecretName: "db-creds", MountPath: "/db"},
				{SecretName: "tls.example.com", MountPath: "/tls"},
				{SecretName: "tmp-dir", MountPath: "/t"},
			}
			fn.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{
				Resources: &corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.25"), corev1.ResourceMemory: resource.MustParse("1024Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m"), corev1.ResourceMemory: resource.MustParse("2048Mi")},
				},
			}}
			fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3)}
		}),
		"nodejs24 with release 1.13's fields": newFunction(v1alpha2.RuntimeNodejs24, func(fn *v1alpha2.Function) {
			fn.Name = "hello-24"
			fn.Spec.PodSecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](1000), SupplementalGroups: []int64{1000}}
			fn.Spec.ContainerSecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)}
			fn.Spec.Env = []corev1.EnvVar{{Name: "FROM_FILE", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{
				VolumeName: "tmp-dir", Path: "app.env", Key: "A", Optional: ptr.To(true)}}}}
		}),
		"git with key auth": gitFunction(func(fn *v1alpha2.Function) {
			fn.Name = "hello-git"
			fn.Spec.Source.GitRepository.Auth = &v1alpha2.RepositoryAuth{Type: GitAuthKey, SecretName: "git-creds"}
		}),
	}
	for name, fn := range functions {
		t.Run(name, func(t *testing.T) {
			in := inputs(fn)

			cmName := "none"
			if cm := SourceConfigMap(in); cm != nil {
				require.NoError(t, c.Create(ctx, cm))
				_, changed := UpdateConfigMap(cm, SourceConfigMap(in))
				assert.False(t, changed, "ConfigMap")
				cmName = cm.Name
			}

			job := BuildJob(in, cmName)
			require.NoError(t, c.Create(ctx, job), "the API server accepts the Job")
			assert.Equal(t, PushImage(in), JobDestination(job))
			_, changed := UpdateJob(job, BuildJob(in, cmName))
			assert.False(t, changed, "Job")

			dep := Deployment(in)
			require.NoError(t, c.Create(ctx, dep), "the API server accepts the Deployment")
			got, changed := UpdateDeployment(dep, Deployment(in))
			assert.False(t, changed, "Deployment: stored object must compare equal, got %+v", got)

			// An update built by the helper is accepted and settles.
			in.Config.PublisherProxyAddress = "http://other/publish"
			updated, changed := UpdateDeployment(dep, Deployment(in))
			require.True(t, changed)
			require.NoError(t, c.Update(ctx, updated))
			_, changed = UpdateDeployment(updated, Deployment(in))
			assert.False(t, changed, "Deployment after update")

			svc := Service(in)
			require.NoError(t, c.Create(ctx, svc))
			_, changed = UpdateService(svc, Service(in))
			assert.False(t, changed, "Service")

			if hpa := HPA(in); hpa != nil {
				require.NoError(t, c.Create(ctx, hpa), "the API server accepts the HPA")
				_, changed = UpdateHPA(hpa, HPA(in))
				assert.False(t, changed, "HPA")
				stored := &autoscalingv2.HorizontalPodAutoscaler{}
				require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(hpa), stored))
				_, changed = UpdateHPA(stored, HPA(in))
				assert.False(t, changed, "HPA read back")
			}

			// The objects read back from the server (not just the create
			// responses) also compare equal.
			var live = dep.DeepCopy()
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(updated), live))
			_, changed = UpdateDeployment(live, Deployment(in))
			assert.False(t, changed, "Deployment read back")
		})
	}
}

// TestHPAAPIServerRoundTrip: an HPA as release 1.8.4 created it
// (autoscaling/v1, the Pod's CPU) is read through autoscaling/v2, updated in
// place to the function container's CPU, and then compares equal; so does an
// HPA whose spec.behavior someone set, which the API server fills in with
// defaults. No case writes twice.
func TestHPAAPIServerRoundTrip(t *testing.T) {
	c := apiServer(t)
	ctx := context.Background()
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fn-test-1"}}))
	fn := newFunction(v1alpha2.RuntimeNodejs22, func(fn *v1alpha2.Function) {
		fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](5)}
	})
	in := inputs(fn)
	desired := HPA(in)
	require.NotNil(t, desired)

	// Each case creates its HPA and returns its key.
	tests := []struct {
		name   string
		create func(t *testing.T) client.ObjectKey
		update bool
	}{
		{name: "release 1.8.4's autoscaling/v1 HPA", update: true, create: func(t *testing.T) client.ObjectKey {
			old := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: *desired.ObjectMeta.DeepCopy(), Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "serverless.kyma-project.io/v1alpha2", Kind: "Function", Name: fn.Name},
				MinReplicas:    ptr.To[int32](2), MaxReplicas: 5, TargetCPUUtilizationPercentage: ptr.To[int32](50),
			}}
			require.NoError(t, c.Create(ctx, old))
			return client.ObjectKeyFromObject(old)
		}},
		{name: "behavior set, defaulted by the API server", update: false, create: func(t *testing.T) client.ObjectKey {
			h := desired.DeepCopy()
			h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)}}
			require.NoError(t, c.Create(ctx, h))
			return client.ObjectKeyFromObject(h)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.create(t)
			live := &autoscalingv2.HorizontalPodAutoscaler{}
			require.NoError(t, c.Get(ctx, key, live))
			updated, changed := UpdateHPA(live, desired)
			require.Equal(t, tt.update, changed, "live spec: %+v", live.Spec)
			if changed {
				require.NoError(t, c.Update(ctx, updated), "the API server accepts the update")
			}

			after := &autoscalingv2.HorizontalPodAutoscaler{}
			require.NoError(t, c.Get(ctx, key, after))
			assert.Equal(t, live.UID, after.UID, "the same object")
			assert.Equal(t, desired.Labels, after.Labels)
			assert.Equal(t, desired.Spec.ScaleTargetRef, after.Spec.ScaleTargetRef)
			assert.Equal(t, desired.Spec.MinReplicas, after.Spec.MinReplicas)
			assert.Equal(t, desired.Spec.MaxReplicas, after.Spec.MaxReplicas)
			assert.Equal(t, desired.Spec.Metrics, after.Spec.Metrics)
			assert.Equal(t, live.Spec.Behavior, after.Spec.Behavior, "behavior kept")
			_, changed = UpdateHPA(after, desired)
			assert.False(t, changed, "the next pass writes nothing")
		})
	}
}

// The build Job's Pod is admitted where the restricted Pod Security
// Standard is enforced, for inline and Git Functions of every runtime; a
// Pod that runs as root is refused there (the check is on).
func TestBuildPodIsRestricted(t *testing.T) {
	c := apiServer(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fn-test-1", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
	}}}
	require.NoError(t, c.Create(ctx, ns))

	functions := map[string]*v1alpha2.Function{"git": gitFunction()}
	for _, rt := range v1alpha2.Runtimes() {
		functions["inline "+string(rt)] = newFunction(rt)
	}
	for name, fn := range functions {
		t.Run(name, func(t *testing.T) {
			job := BuildJob(inputs(fn), "hello-vbrth")
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, GenerateName: "build-"}, Spec: job.Spec.Template.Spec}
			assert.NoError(t, c.Create(ctx, pod, client.DryRunAll))
		})
	}

	root := BuildJob(inputs(newFunction(v1alpha2.RuntimeNodejs22)), "hello-vbrth").Spec.Template.Spec
	root.SecurityContext.RunAsNonRoot, root.SecurityContext.RunAsUser = nil, ptr.To[int64](0)
	err := c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, GenerateName: "build-"}, Spec: root}, client.DryRunAll)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "violates PodSecurity \"restricted:latest\"")
}

// TestBuildlessAPIServerRoundTrip: the API server accepts every buildless
// Deployment and Service, and the stored, defaulted objects compare equal to
// freshly built ones — where release 1.13 would update forever (a fieldRef
// without apiVersion,
// docs/contributor/upstream-contract.md#what-rolls-buildless-pods), this
// controller writes nothing. An update it builds is accepted and settles.
func TestBuildlessAPIServerRoundTrip(t *testing.T) {
	c := apiServer(t)
	ctx := context.Background()
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns1"}}))

	withEverything := inlinePython()
	withEverything.Name, withEverything.UID = "everything", "8e1f5a2c-6b3d-4e7f-9a0b-1c2d3e4f5a6b"
	withEverything.Spec.Env = append(withEverything.Spec.Env,
		corev1.EnvVar{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
		corev1.EnvVar{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
			Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
		corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}},
		corev1.EnvVar{Name: "FROM_FILE", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{
			VolumeName: "tmp", Path: "app.env", Key: "A"}}},
	)
	withEverything.Spec.SecretMounts = append(withEverything.Spec.SecretMounts,
		v1alpha2.SecretMount{SecretName: "tls.example.com", MountPath: "/tls"}, v1alpha2.SecretMount{SecretName: "tmp", MountPath: "/t"})
	withEverything.Spec.PodSecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](2000), RunAsNonRoot: ptr.To(true)}
	withEverything.Spec.ContainerSecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.DefaultProcMount),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	withEverything.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.25"), corev1.ResourceMemory: resource.MustParse("1024Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m")},
		},
	}}
	gitKey := exampleB()
	gitKey.Function.Name, gitKey.Function.UID = "g-key", "2b4d6f80-1a3c-4e5f-8b9d-0e2f4a6c8e1b"
	gitKey.Function.Spec.Runtime = v1alpha2.RuntimeNodejs22
	gitKey.Function.Spec.Source.GitRepository.Auth.Type = "key"
	gitKey.GitAuth = &git.SecretKeys{Key: "ssh-privatekey"}

	for name, in := range map[string]BuildlessInputs{
		"Example A":        {Function: exampleA(), Config: buildlessConfig()},
		"inline Python":    {Function: inlinePython(), Config: buildlessConfig()},
		"with everything":  {Function: withEverything, Config: buildlessConfig()},
		"Example B":        exampleB(),
		"Git Node.js, key": gitKey,
	} {
		t.Run(name, func(t *testing.T) {
			dep := BuildlessDeployment(in)
			require.NoError(t, c.Create(ctx, dep), "the API server accepts the Deployment")
			live := &appsv1.Deployment{}
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(dep), live))
			in.Live = live
			assert.Equal(t, BuildlessChange{}, CompareBuildless(live, BuildlessDeployment(in)), "the stored Deployment compares equal")

			in.Config = buildlessConfig()
			in.Config.PublisherProxyAddress = "http://other/publish"
			updated, change := UpdateBuildlessDeployment(live, BuildlessDeployment(in))
			require.True(t, change.Template)
			require.NoError(t, c.Update(ctx, updated))
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(dep), live))
			in.Live = live
			assert.Equal(t, BuildlessChange{}, CompareBuildless(live, BuildlessDeployment(in)), "the update settles")

			svc := BuildlessService(in.Function)
			require.NoError(t, c.Create(ctx, svc))
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(svc), svc))
			_, changed := UpdateService(svc, BuildlessService(in.Function))
			assert.False(t, changed, "Service")
		})
	}
}

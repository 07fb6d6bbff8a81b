package resources

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
)

// buildlessConfig is release 1.13's chart configuration as far as the
// buildless builders read it: its images, its XS and S presets (XS the
// default, as 1.13's operator sets on small clusters), no tracing.
func buildlessConfig() *config.Config {
	images := map[v1alpha2.Runtime]string{}
	for _, rt := range v1alpha2.Runtimes() {
		images[rt] = "europe-docker.pkg.dev/kyma-project/prod/function-runtime-" + string(rt) + ":1.13.0"
	}
	return &config.Config{
		Mode:                            config.ModeBuildless,
		PublisherProxyAddress:           "http://eventing-publisher-proxy.kyma-system.svc.cluster.local/publish",
		PackageRegistryConfigSecretName: "serverless-package-registry-config",
		Resources: config.ResourceConfig{Function: config.Presets{
			DefaultPreset: "XS",
			Presets: map[string]config.Preset{
				"XS": {RequestCPU: quantity("50m"), RequestMemory: quantity("64Mi"), LimitCPU: quantity("150m"), LimitMemory: quantity("256Mi")},
				"S":  {RequestCPU: quantity("100m"), RequestMemory: quantity("128Mi"), LimitCPU: quantity("200m"), LimitMemory: quantity("256Mi")},
			},
		}},
		Buildless: config.BuildlessConfig{
			RuntimeImages: images,
			InitImage:     "europe-docker.pkg.dev/kyma-project/prod/function-buildless-init:1.13.0",
		},
	}
}

// exampleA is an inline Node.js Function with labels, annotations and env
// (testdata/buildless/hello-function.yaml, shared with the app tests).
func exampleA() *v1alpha2.Function {
	data, err := os.ReadFile(filepath.Join("testdata", "buildless", "hello-function.yaml"))
	if err != nil {
		panic(err)
	}
	fn := &v1alpha2.Function{}
	if err := yaml.UnmarshalStrict(data, fn); err != nil {
		panic(err)
	}
	return fn
}

func inlinePython() *v1alpha2.Function {
	return &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Name: "hello-py", Namespace: "ns1", UID: "7d0b9a36-52e1-4f0c-8a43-3c6e2f1d9b10"},
		Spec: v1alpha2.FunctionSpec{
			Runtime: v1alpha2.RuntimePython312,
			Source: v1alpha2.Source{Inline: &v1alpha2.InlineSource{
				Source: "def main(event, context):\n    return \"Hello World!\"\n", Dependencies: "requests==2.32.3"}},
			Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			SecretMounts:          []v1alpha2.SecretMount{{SecretName: "db", MountPath: "/db"}},
			ResourceConfiguration: &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{Profile: "S"}},
			Replicas:              ptr.To[int32](2),
		},
	}
}

const exampleBCommit = "3f1c0e6a9b8d7c5e4f3a2b1c0d9e8f7a6b5c4d3e"

// exampleB is a Git Python Function (baseDir /fn, reference main, basic
// auth), its commit resolved and its basic-auth Secret read.
func exampleB() BuildlessInputs {
	return BuildlessInputs{
		Function: &v1alpha2.Function{
			ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns1", UID: "c4a8e2f0-1d3b-4a5c-9e7f-0b2d4f6a8c1e"},
			Spec: v1alpha2.FunctionSpec{
				Runtime: v1alpha2.RuntimePython312,
				Source: v1alpha2.Source{GitRepository: &v1alpha2.GitRepositorySource{
					URL:        "https://github.com/example/functions.git",
					Auth:       &v1alpha2.RepositoryAuth{Type: "basic", SecretName: "creds"},
					Repository: v1alpha2.Repository{BaseDir: "/fn", Reference: "main"},
				}},
			},
		},
		Config:  buildlessConfig(),
		Commit:  exampleBCommit,
		GitAuth: &git.SecretKeys{Username: "username", Password: "password"},
	}
}

func readFixture[T any](t *testing.T, name string) *T {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "buildless", name))
	require.NoError(t, err)
	out := new(T)
	require.NoError(t, yaml.UnmarshalStrict(data, out))
	return out
}

// asYAML is an object without its type, for readable diffs.
func asYAML(t *testing.T, obj any) string {
	t.Helper()
	data, err := yaml.Marshal(obj)
	require.NoError(t, err)
	return string(data)
}

// Our buildless Deployment and Service are release 1.13's, field for field,
// for each source kind (fixtures written from 1.13's behaviour,
// docs/contributor/upstream-contract.md#buildless-mode-113, not from this code).
func TestBuildlessMatchesRelease113(t *testing.T) {
	tests := []struct {
		name, deployment, service string
		in                        BuildlessInputs
	}{
		{"inline Node.js (Example A)", "hello-deployment.yaml", "hello-service.yaml",
			BuildlessInputs{Function: exampleA(), Config: buildlessConfig()}},
		{"inline Python", "hello-py-deployment.yaml", "", BuildlessInputs{Function: inlinePython(), Config: buildlessConfig()}},
		{"Git Python (Example B)", "g-deployment.yaml", "", exampleB()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := readFixture[appsv1.Deployment](t, tt.deployment)
			want.TypeMeta = metav1.TypeMeta{}
			got := BuildlessDeployment(tt.in)
			assert.Equal(t, asYAML(t, want), asYAML(t, got))
			assert.False(t, CompareBuildless(want, got).Any(), "1.13's Deployment is adopted as it is")

			if tt.service != "" {
				want := readFixture[corev1.Service](t, tt.service)
				want.TypeMeta = metav1.TypeMeta{}
				got := BuildlessService(tt.in.Function)
				assert.Equal(t, asYAML(t, want), asYAML(t, got))
				_, changed := UpdateService(want, got)
				assert.False(t, changed)
			}
		})
	}
}

// The Pod's Git auth env by Secret layout: key auth reads the key (and a
// passphrase when the Secret has one); no layout, no auth env.
func TestBuildlessGitAuthEnv(t *testing.T) {
	ref := func(env, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: key}}}
	}
	authType := func(v string) corev1.EnvVar { return corev1.EnvVar{Name: "APP_REPOSITORY_AUTH_TYPE", Value: v} }
	tests := []struct {
		name     string
		authType string
		keys     *git.SecretKeys
		want     []corev1.EnvVar
	}{
		{"ssh-auth Secret", "key", &git.SecretKeys{Key: "ssh-privatekey"},
			[]corev1.EnvVar{authType("key"), ref("APP_REPOSITORY_KEY", "ssh-privatekey")}},
		{"1.8.4 key Secret with passphrase", "key", &git.SecretKeys{Key: "key", Password: "password"},
			[]corev1.EnvVar{authType("key"), ref("APP_REPOSITORY_KEY", "key"), ref("APP_REPOSITORY_PASSWORD", "password")}},
		{"basic", "basic", &git.SecretKeys{Username: "username", Password: "password"},
			[]corev1.EnvVar{authType("basic"), ref("APP_REPOSITORY_USERNAME", "username"), ref("APP_REPOSITORY_PASSWORD", "password")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := exampleB()
			in.Function.Spec.Source.GitRepository.Auth.Type = tt.authType
			in.GitAuth = tt.keys
			env := BuildlessDeployment(in).Spec.Template.Spec.InitContainers[0].Env
			assert.Equal(t, tt.want, env[4:])
		})
	}
	in := exampleB()
	in.Function.Spec.Source.GitRepository.Auth = nil
	in.GitAuth = nil
	assert.Len(t, BuildlessDeployment(in).Spec.Template.Spec.InitContainers[0].Env, 4, "no auth, no auth env")
}

// The script's variants: dependencies add a line; Git Node.js writes an
// empty package.json before the copy; baseDir is trimmed of slashes and
// blanks and quoted.
func TestBuildlessScripts(t *testing.T) {
	node := exampleA()
	node.Spec.Source.Inline.Dependencies = `{"dependencies": {}}`
	assert.Equal(t, "set -e;\n"+
		"echo \"{}\" > package.json;\n"+
		"echo \"${FUNC_HANDLER_SOURCE}\" > handler.js;\n"+
		"echo \"${FUNC_HANDLER_DEPENDENCIES}\" > package.json;\n"+
		"NPM_CONFIG_USERCONFIG=package-registry-config/.npmrc npm install --prefer-offline --no-audit --progress=false;\n"+
		"cd ..;\n"+
		"npm start;", command(BuildlessDeployment(BuildlessInputs{Function: node, Config: buildlessConfig()})))

	in := exampleB()
	in.Function.Spec.Runtime = v1alpha2.RuntimeNodejs22
	in.Function.Spec.Source.GitRepository.BaseDir = " /my functions/a/ "
	dep := BuildlessDeployment(in)
	assert.Equal(t, "set -e;\n"+
		"echo \"{}\" > package.json;\n"+
		"cp -r /git-repository/src/* .;\n"+
		"NPM_CONFIG_USERCONFIG=package-registry-config/.npmrc npm install --prefer-offline --no-audit --progress=false;\n"+
		"cd ..;\n"+
		"npm start;", command(dep))
	assert.Equal(t, "rm -rf /git-repository/*\n/app/gitcloner\n"+
		"mkdir /git-repository/src;cp -r '/git-repository/repo/my functions/a'/* /git-repository/src;",
		dep.Spec.Template.Spec.InitContainers[0].Command[2])
	assert.Equal(t, "/usr/src/app/function", dep.Spec.Template.Spec.InitContainers[0].WorkingDir)
}

func envNamed(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	panic("no env " + name)
}

func command(d *appsv1.Deployment) string { return d.Spec.Template.Spec.Containers[0].Command[2] }

// Security contexts: the Function's fields win; 1.13's base fills the
// fields it leaves unset (docs/contributor/upstream-contract.md#buildless-deployment).
func TestBuildlessSecurityContexts(t *testing.T) {
	fn := exampleA()
	fn.Spec.PodSecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](2000), RunAsNonRoot: ptr.To(true),
		SupplementalGroups: []int64{5}}
	fn.Spec.ContainerSecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(false),
		ProcMount: ptr.To(corev1.UnmaskedProcMount)}
	assert.Equal(t, &corev1.PodSecurityContext{
		RunAsUser: ptr.To[int64](2000), RunAsGroup: ptr.To[int64](1000), FSGroup: ptr.To[int64](1000),
		SupplementalGroups: []int64{5}, RunAsNonRoot: ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}, BuildlessPodSecurityContext(fn))
	assert.Equal(t, &corev1.SecurityContext{
		Privileged: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ProcMount: ptr.To(corev1.UnmaskedProcMount), ReadOnlyRootFilesystem: ptr.To(false),
		AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
	}, BuildlessContainerSecurityContext(fn))
	assert.Nil(t, fn.Spec.PodSecurityContext.FSGroup, "the Function is not modified")
}

// The Pod template's annotations, merged as 1.13 merges them
// (docs/contributor/upstream-contract.md#buildless-pod-annotations).
func TestBuildlessAnnotations(t *testing.T) {
	defaults := map[string]string{
		AnnotationIstioProxyConfig:   IstioProxyConfig,
		AnnotationAlterImageRegistry: "true",
		AnnotationAddImagePullSecret: "true",
		AnnotationIstioNativeSidecar: "true",
	}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range defaults {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name               string
		spec, status, live map[string]string
		noLive             bool
		want               map[string]string
	}{
		{name: "new Deployment", spec: map[string]string{"a": "1"}, noLive: true, want: with(map[string]string{"a": "1"})},
		{name: "a restart annotation is kept", spec: map[string]string{"a": "1"}, status: map[string]string{"a": "1"},
			live: with(map[string]string{"a": "1", "kubectl.kubernetes.io/restartedAt": "2026-07-10T10:00:00Z"}),
			want: with(map[string]string{"a": "1", "kubectl.kubernetes.io/restartedAt": "2026-07-10T10:00:00Z"})},
		{name: "a key removed from the spec goes", spec: map[string]string{"b": "2"}, status: map[string]string{"a": "1", "b": "2"},
			live: with(map[string]string{"a": "1", "b": "2"}), want: with(map[string]string{"b": "2"})},
		{name: "a changed value is the spec's", spec: map[string]string{"a": "2"}, status: map[string]string{"a": "1"},
			live: with(map[string]string{"a": "1"}), want: with(map[string]string{"a": "2"})},
		{name: "a key the status does not know stays (foreign)", spec: nil, status: nil,
			live: with(map[string]string{"a": "1"}), want: with(map[string]string{"a": "1"})},
		{name: "the defaults win over the spec", spec: map[string]string{AnnotationAlterImageRegistry: "false"},
			noLive: true, want: with(nil)},
		{name: "the spec's native-sidecar value wins", spec: map[string]string{AnnotationIstioNativeSidecar: "false"},
			noLive: true, want: with(map[string]string{AnnotationIstioNativeSidecar: "false"})},
		{name: "a foreign native-sidecar value stays", live: map[string]string{AnnotationIstioNativeSidecar: "false"},
			want: with(map[string]string{AnnotationIstioNativeSidecar: "false"})},
		{name: "a 1.8.4 template loses its native-sidecar key once the status knows it",
			status: map[string]string{AnnotationIstioNativeSidecar: "false"},
			live:   map[string]string{AnnotationIstioNativeSidecar: "false", AnnotationIstioProxyConfig: IstioProxyConfig},
			want:   with(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := exampleA()
			fn.Spec.Annotations, fn.Status.FunctionAnnotations = tt.spec, tt.status
			var live *appsv1.Deployment
			if !tt.noLive {
				live = &appsv1.Deployment{}
				live.Spec.Template.Annotations = tt.live
			}
			got := BuildlessDeployment(BuildlessInputs{Function: fn, Config: buildlessConfig(), Live: live})
			assert.Equal(t, tt.want, got.Spec.Template.Annotations)
		})
	}
}

// What rolls the Pods, what only scales and what is no change
// (docs/contributor/upstream-contract.md#what-rolls-buildless-pods), against a
// live copy of the desired Deployment as the API server stores it.
func TestCompareBuildless(t *testing.T) {
	rolls := BuildlessChange{Template: true}
	scales := BuildlessChange{Replicas: true}
	none := BuildlessChange{}
	fn := func(d *appsv1.Deployment) *corev1.Container { return &d.Spec.Template.Spec.Containers[0] }
	ini := func(d *appsv1.Deployment) *corev1.Container { return &d.Spec.Template.Spec.InitContainers[0] }
	tests := []struct {
		name string
		git  bool
		live func(*appsv1.Deployment)
		want BuildlessChange
	}{
		{"nothing", false, func(*appsv1.Deployment) {}, none},
		{"image", false, func(d *appsv1.Deployment) { fn(d).Image += "-rc" }, rolls},
		{"template label", false, func(d *appsv1.Deployment) { d.Spec.Template.Labels["x"] = "y" }, rolls},
		{"template annotation", false, func(d *appsv1.Deployment) { d.Spec.Template.Annotations["x"] = "y" }, rolls},
		{"replicas", false, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) }, scales},
		{"workingDir", false, func(d *appsv1.Deployment) { fn(d).WorkingDir = "/" }, rolls},
		{"command", false, func(d *appsv1.Deployment) { fn(d).Command[2] += " " }, rolls},
		{"env value", false, func(d *appsv1.Deployment) { fn(d).Env[0].Value = "other" }, rolls},
		{"env order", false, func(d *appsv1.Deployment) { e := fn(d).Env; e[0], e[1] = e[1], e[0] }, rolls},
		{"env fieldRef apiVersion defaulted", false, func(d *appsv1.Deployment) {
			envNamed(fn(d), "POD_NAME").ValueFrom.FieldRef.APIVersion = "v1"
		}, none},
		{"env fieldRef apiVersion other", false, func(d *appsv1.Deployment) {
			envNamed(fn(d), "POD_NAME").ValueFrom.FieldRef.APIVersion = "v2"
		}, rolls},
		{"volumeMounts", false, func(d *appsv1.Deployment) { fn(d).VolumeMounts[0].ReadOnly = true }, rolls},
		{"port protocol defaulted", false, func(d *appsv1.Deployment) { fn(d).Ports[0].Protocol = "" }, none},
		{"port", false, func(d *appsv1.Deployment) { fn(d).Ports[0].ContainerPort = 8081 }, rolls},
		{"cpu written otherwise", false, func(d *appsv1.Deployment) {
			fn(d).Resources.Requests[corev1.ResourceCPU] = resource.MustParse("0.1")
			fn(d).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("268435456")
		}, none},
		{"memory limit", false, func(d *appsv1.Deployment) {
			fn(d).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("512Mi")
		}, rolls},
		{"other resources are not compared", false, func(d *appsv1.Deployment) {
			fn(d).Resources.Limits[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		}, none},
		{"pod securityContext", false, func(d *appsv1.Deployment) { d.Spec.Template.Spec.SecurityContext.FSGroup = ptr.To[int64](2) }, rolls},
		{"container securityContext", false, func(d *appsv1.Deployment) { fn(d).SecurityContext.RunAsNonRoot = ptr.To(false) }, rolls},
		{"container procMount Default stored", false, func(d *appsv1.Deployment) {
			fn(d).SecurityContext.ProcMount = ptr.To(corev1.DefaultProcMount)
		}, none},
		{"probes are not compared", false, func(d *appsv1.Deployment) { fn(d).LivenessProbe.PeriodSeconds = 10 }, none},
		{"volumes are not compared", false, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Volumes = nil }, none},
		{"service account is not compared", false, func(d *appsv1.Deployment) { d.Spec.Template.Spec.ServiceAccountName = "serverless-function" }, none},
		{"container name is not compared", false, func(d *appsv1.Deployment) { fn(d).Name = "main" }, none},
		{"a second container", false, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "x"})
		}, rolls},
		{"an init container more", false, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "x"}}
		}, rolls},
		{"init image", true, func(d *appsv1.Deployment) { ini(d).Image += "-rc" }, rolls},
		{"init commit", true, func(d *appsv1.Deployment) {
			envNamed(ini(d), "APP_REPOSITORY_COMMIT").Value = "0000000000000000000000000000000000000000"
		}, rolls},
		{"init workingDir", true, func(d *appsv1.Deployment) { ini(d).WorkingDir = "/" }, rolls},
		{"init command", true, func(d *appsv1.Deployment) { ini(d).Command = ini(d).Command[:2] }, rolls},
		{"init volumeMounts", true, func(d *appsv1.Deployment) { ini(d).VolumeMounts = nil }, rolls},
		{"init resources are not compared", true, func(d *appsv1.Deployment) { ini(d).Resources = corev1.ResourceRequirements{} }, none},
		{"init securityContext is not compared", true, func(d *appsv1.Deployment) { ini(d).SecurityContext = nil }, none},
		{"two init containers", true, func(d *appsv1.Deployment) {
			s := &d.Spec.Template.Spec
			s.InitContainers = append(s.InitContainers, *s.InitContainers[0].DeepCopy())
		}, rolls},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := BuildlessInputs{Function: inlinePython(), Config: buildlessConfig()}
			if tt.git {
				in = exampleB()
			}
			desired := BuildlessDeployment(in)
			live := desired.DeepCopy()
			tt.live(live)
			got := CompareBuildless(live, desired)
			assert.Equal(t, got.Template, got.Field != "", "a template change names its field: %q", got.Field)
			got.Field = ""
			assert.Equal(t, tt.want, got)
		})
	}
}

// Env fields the API server defaults are equal to their default; every
// other difference counts (release 1.13 compares env exactly and would
// update the first two forever).
func TestBuildlessEnvDefaults(t *testing.T) {
	fieldRef := func(apiVersion string) corev1.EnvVar {
		return corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			APIVersion: apiVersion, FieldPath: "status.podIP"}}}
	}
	fileKeyRef := func(optional *bool) corev1.EnvVar {
		return corev1.EnvVar{Name: "A", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{
			VolumeName: "tmp", Path: "app.env", Key: "A", Optional: optional}}}
	}
	secretRef := func(optional *bool) corev1.EnvVar {
		return corev1.EnvVar{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k", Optional: optional}}}
	}
	divisor := func(q string) corev1.EnvVar {
		return corev1.EnvVar{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
			Resource: "limits.cpu", Divisor: resource.MustParse(q)}}}
	}
	tests := []struct {
		name          string
		live, desired corev1.EnvVar
		equal         bool
	}{
		{"fieldRef apiVersion stored v1", fieldRef("v1"), fieldRef(""), true},
		{"fieldRef apiVersion other", fieldRef("v2"), fieldRef(""), false},
		{"fileKeyRef optional stored false", fileKeyRef(ptr.To(false)), fileKeyRef(nil), true},
		{"fileKeyRef optional true", fileKeyRef(ptr.To(true)), fileKeyRef(nil), false},
		{"secretKeyRef optional is not defaulted", secretRef(ptr.To(false)), secretRef(nil), false},
		{"divisor 0 stored for none", divisor("0"), corev1.EnvVar{Name: "CPU", ValueFrom: &corev1.EnvVarSource{
			ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}, true},
		{"divisor as quantity", divisor("1000m"), divisor("1"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := BuildlessDeployment(BuildlessInputs{Function: exampleA(), Config: buildlessConfig()})
			desired := live.DeepCopy()
			c := &live.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, tt.live)
			c = &desired.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, tt.desired)
			assert.Equal(t, !tt.equal, CompareBuildless(live, desired).Template)
		})
	}
}

// An update replaces template and replicas as a whole and nothing else; a
// replicas-only change leaves the template alone.
func TestUpdateBuildlessDeployment(t *testing.T) {
	in := BuildlessInputs{Function: exampleA(), Config: buildlessConfig()}
	desired := BuildlessDeployment(in)
	live := desired.DeepCopy()
	live.Name, live.ResourceVersion, live.UID = "hello-x7k2p", "41", types.UID("d1")
	live.Annotations = map[string]string{"deployment.kubernetes.io/revision": "3"}
	live.Spec.RevisionHistoryLimit = ptr.To[int32](0)
	live.Spec.Template.Spec.ServiceAccountName = "serverless-function"

	_, change := UpdateBuildlessDeployment(live, desired)
	assert.False(t, change.Any(), "uncompared fields alone are no change")

	scaled := exampleA()
	scaled.Spec.Replicas = ptr.To[int32](4)
	in.Function = scaled
	out, change := UpdateBuildlessDeployment(live, BuildlessDeployment(in))
	require.NotNil(t, out)
	assert.Equal(t, BuildlessChange{Replicas: true}, change)
	assert.Equal(t, int32(4), *out.Spec.Replicas)
	assert.Equal(t, live.Spec.Template, out.Spec.Template, "scaling keeps the template, so no Pod rolls")

	changed := exampleA()
	changed.Spec.Replicas = ptr.To[int32](2)
	changed.Spec.Env[0].Value = "hi"
	in.Function = changed
	want := BuildlessDeployment(in)
	out, change = UpdateBuildlessDeployment(live, want)
	require.NotNil(t, out)
	assert.Equal(t, BuildlessChange{Template: true, Field: "container env", Replicas: true}, change)
	assert.Equal(t, want.Spec.Template, out.Spec.Template)
	assert.Equal(t, int32(2), *out.Spec.Replicas)
	assert.Equal(t, live.ObjectMeta, out.ObjectMeta, "metadata is kept")
	assert.Equal(t, ptr.To[int32](0), out.Spec.RevisionHistoryLimit, "so is the rest of the spec")
}

// A 1.13 installation in FIPS mode is adopted as it is: its Git
// Functions' init container carries 1.13's FIPS variables, which our
// controller in FIPS mode writes alike; inline Functions have no init
// container and are the same in both modes. A switch of the mode rolls
// Git Functions, as in 1.13.
func TestBuildlessFIPSModeMatchesRelease113(t *testing.T) {
	fipsConfig := buildlessConfig()
	fipsConfig.FIPSMode = true
	tests := []struct {
		name       string
		deployment string
		in         BuildlessInputs
		wantChange string
	}{
		{name: "Git, FIPS mode: 1.13's FIPS Deployment", deployment: "g-fips-deployment.yaml", in: withConfig(exampleB(), fipsConfig)},
		{name: "inline, FIPS mode: 1.13's Deployment", deployment: "hello-deployment.yaml",
			in: BuildlessInputs{Function: exampleA(), Config: fipsConfig}},
		{name: "Git, FIPS mode switched on", deployment: "g-deployment.yaml", in: withConfig(exampleB(), fipsConfig),
			wantChange: "initContainer env"},
		{name: "Git, FIPS mode switched off", deployment: "g-fips-deployment.yaml", in: exampleB(),
			wantChange: "initContainer env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := readFixture[appsv1.Deployment](t, tt.deployment)
			live.TypeMeta = metav1.TypeMeta{}
			got := BuildlessDeployment(tt.in)
			change := CompareBuildless(live, got)
			assert.Equal(t, tt.wantChange, change.Field)
			if tt.wantChange == "" {
				assert.Equal(t, asYAML(t, live), asYAML(t, got))
			}
		})
	}
}

func withConfig(in BuildlessInputs, c *config.Config) BuildlessInputs {
	in.Config = c
	return in
}

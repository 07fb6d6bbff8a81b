package render_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/charts"
	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/render"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// variant is one way the manager configures the chart: values built from a
// Serverless spec exactly as the manager builds them, plus chart-only
// values a user of the plain chart might set.
type variant struct {
	name  string
	spec  v1alpha1.ServerlessSpec
	facts values.Facts
	extra map[string]any
}

func variants() []variant {
	fixed := func(n int) string { return strings.Repeat("x", n) }
	return []variant{
		{name: "default", facts: values.Facts{Nodes: 3}},
		{name: "internal-registry", spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}},
			facts: values.Facts{Nodes: 3, NodePort: 32140, PVCSize: "30Gi"}},
		{name: "external-registry", spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{SecretName: ptr.To("my-registry")}},
			facts: values.Facts{Nodes: 3, RegistrySecret: map[string][]byte{
				"username": []byte("robot"), "password": []byte("s3cret,1"), "serverAddress": []byte("registry.example.com"), "registryAddress": []byte("registry.example.com/team")}}},
		{name: "custom-presets", spec: v1alpha1.ServerlessSpec{
			DefaultBuildJobPreset: "fast", DefaultRuntimePodPreset: "XL", LogLevel: "debug", LogFormat: "text",
			TargetCPUUtilizationPercentage: ptr.To(intstr.FromInt32(70)), FunctionBuildMaxSimultaneousJobs: ptr.To(intstr.FromString("9")),
			FunctionBuildExecutorArgs: "--insecure,--cache=false", FunctionRequeueDuration: "90s", HealthzLivenessTimeout: "20s",
			Eventing: &v1alpha1.Endpoint{Endpoint: "http://events.example/publish"}, Tracing: &v1alpha1.Endpoint{Endpoint: "http://otel.example:4318/v1/traces"},
		}, facts: values.Facts{Nodes: 1, ImageOverrides: map[string]string{"function_controller": "mirror.example/fc:1.8.4"}}},
		{name: "network-policies", spec: v1alpha1.ServerlessSpec{EnableNetworkPolicies: true}, facts: values.Facts{Nodes: 3}},
		{name: "replicas", facts: values.Facts{Nodes: 3}, extra: map[string]any{"controller": map[string]any{"replicas": int64(2)}}},
		{name: "buildless", spec: v1alpha1.ServerlessSpec{FunctionMode: v1alpha1.FunctionModeBuildless}, facts: values.Facts{Nodes: 3}},
		{name: "buildless-internal-registry", spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}},
			facts: values.Facts{Nodes: 3, NodePort: 32140, Mode: values.ModeFacts{Annotation: "enabled"}}},
		// The manager with KYMA_FIPS_MODE_ENABLED=true (docs/contributor/fips.md).
		{name: "fips", spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}},
			facts: values.Facts{Nodes: 3, NodePort: 32140, FIPSMode: true}},
		{name: "fips-buildless", spec: v1alpha1.ServerlessSpec{FunctionMode: v1alpha1.FunctionModeBuildless}, facts: values.Facts{Nodes: 3, FIPSMode: true}},
		// Not a golden: every switch on at once, for the dry run and the kinds check.
		{name: "everything", spec: v1alpha1.ServerlessSpec{EnableNetworkPolicies: true, DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}},
			facts: values.Facts{Nodes: 3, InternalCredentials: &values.Credentials{Username: fixed(20), Password: fixed(40)}, FIPSMode: true},
			extra: map[string]any{"controller": map[string]any{"replicas": int64(3)}}},
	}
}

func renderer(t testing.TB) *render.Renderer {
	t.Helper()
	chrt, err := render.LoadChart(charts.Serverless())
	require.NoError(t, err)
	return render.New(chrt, nil)
}

func (v variant) render(t *testing.T, r *render.Renderer) []*unstructured.Unstructured {
	t.Helper()
	f := v.facts
	f.Namespace = "kyma-system"
	n := 0
	f.NewSecret = func(l int) string { n++; return strings.Repeat(string(rune('a'+n)), l) }
	built, err := values.Build(v.spec, f)
	require.NoError(t, err)
	vals, err := built.Values.Map()
	require.NoError(t, err)
	for k, x := range v.extra {
		if m, ok := vals[k].(map[string]any); ok {
			for kk, vv := range x.(map[string]any) {
				m[kk] = vv
			}
			continue
		}
		vals[k] = x
	}
	objs, err := r.Render("kyma-system", vals)
	require.NoError(t, err, "the manager's values must pass the chart's schema")
	return objs
}

func TestGoldenRenders(t *testing.T) {
	r := renderer(t)
	for _, v := range variants() {
		if v.name == "everything" {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			var buf bytes.Buffer
			for _, o := range v.render(t, r) {
				if o.GetKind() == "CustomResourceDefinition" {
					continue // generated from Go types; validated by TestFunctionValidation
				}
				data, err := yaml.Marshal(o.Object)
				require.NoError(t, err)
				buf.WriteString("---\n")
				buf.Write(data)
			}
			path := filepath.Join("testdata", "golden", v.name+".yaml")
			if *update {
				require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run `go test ./operator/internal/manager/render -update` to create it")
			assert.Equal(t, string(want), buf.String())
		})
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	r := renderer(t)
	for _, v := range variants() {
		a, b := v.render(t, r), v.render(t, r)
		assert.Equal(t, a, b, v.name)
	}
}

// env is the literal env of a Deployment's first container.
func env(d *unstructured.Unstructured) map[string]string {
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	out := map[string]string{}
	for _, e := range containers[0].(map[string]any)["env"].([]any) {
		m := e.(map[string]any)
		if v, ok := m["value"].(string); ok {
			out[m["name"].(string)] = v
		}
	}
	return out
}

func TestChartFacts(t *testing.T) {
	r := renderer(t)
	byName := func(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
		return find(t, objs, kind, name)
	}
	vs := variants()

	objs := vs[3].render(t, r) // custom presets
	e := env(byName(objs, "Deployment", "serverless-ctrl-mngr"))
	assert.Equal(t, "--insecure,--cache=false", e["APP_FUNCTION_BUILD_EXECUTOR_ARGS"])
	assert.Equal(t, "9", e["APP_FUNCTION_BUILD_MAX_SIMULTANEOUS_JOBS"])
	assert.Equal(t, "70", e["APP_FUNCTION_TARGET_CPU_UTILIZATION_PERCENTAGE"])
	assert.Equal(t, "90s", e["APP_FUNCTION_FUNCTION_READY_REQUEUE_DURATION"], "the requeue the controller really reads")
	assert.NotContains(t, e, "APP_FUNCTION_REQUEUE_DURATION", "the dead knob is not rendered")
	assert.Equal(t, "mirror.example/fc:1.8.4", byName(objs, "Deployment", "serverless-ctrl-mngr").Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"])
	var rc map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(e["APP_FUNCTION_RESOURCE_CONFIG"]), &rc))
	fn := rc["function"].(map[string]any)["resources"].(map[string]any)
	assert.Equal(t, "XL", fn["defaultPreset"])
	assert.Equal(t, "10m", fn["minRequestedCPU"], "the key names the controller parses")
	assert.Len(t, fn["presets"], 5)
	assert.Equal(t, "fast", rc["buildJob"].(map[string]any)["resources"].(map[string]any)["defaultPreset"])
	logCM := byName(objs, "ConfigMap", "serverless-configuration")
	assert.Equal(t, "logLevel: debug\nlogFormat: text\n", logCM.Object["data"].(map[string]any)["log-config.yaml"])

	objs = vs[1].render(t, r) // internal registry
	secret := byName(objs, "Secret", "serverless-registry-config-default")
	assert.Equal(t, "credentials", secret.GetLabels()["serverless.kyma-project.io/config"])
	svc := byName(objs, "Service", "serverless-docker-registry")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	assert.EqualValues(t, 32140, ports[0].(map[string]any)["nodePort"], "NodePort and pull address come from one value")
	pull, _, _ := unstructured.NestedString(secret.Object, "data", "pullRegAddr")
	assert.Equal(t, "bG9jYWxob3N0OjMyMTQw", pull) // localhost:32140
	require.Len(t, ports, 1, "the registry's NodePort Service exposes the registry only")
	assert.EqualValues(t, 5000, ports[0].(map[string]any)["targetPort"])
	agentSvc := byName(objs, "Service", module.RegistryAgentServiceName)
	assert.Equal(t, "ClusterIP", agentSvc.Object["spec"].(map[string]any)["type"], "nodes have no business with the agent")
	agentPorts, _, _ := unstructured.NestedSlice(agentSvc.Object, "spec", "ports")
	require.Len(t, agentPorts, 1)
	assert.Equal(t, registryagent.PortName, agentPorts[0].(map[string]any)["name"])
	assert.EqualValues(t, registryagent.Port, agentPorts[0].(map[string]any)["port"])
	assert.EqualValues(t, registryagent.Port, agentPorts[0].(map[string]any)["targetPort"])
	reg := byName(objs, "Deployment", "serverless-docker-registry")
	podSpec, _, _ := unstructured.NestedMap(reg.Object, "spec", "template", "spec")
	assert.Equal(t, false, podSpec["automountServiceAccountToken"], "neither container talks to the API server")
	containers := podSpec["containers"].([]any)
	require.Len(t, containers, 2)
	agent := containers[1].(map[string]any)
	assert.Equal(t, "registry-agent", agent["name"])
	assert.Equal(t, []any{"/" + module.RegistryAgent().Binary}, agent["command"], "the entrypoint of its own image")
	assert.Equal(t, "europe-docker.pkg.dev/kyma-project/prod/serverless-registry-agent:"+moduleVersion(t), agent["image"])
	agentEnv := map[string]string{}
	for _, e := range agent["env"].([]any) {
		agentEnv[e.(map[string]any)["name"].(string)] = e.(map[string]any)["value"].(string)
	}
	assert.Equal(t, map[string]string{
		registryagent.EnvAddress:        fmt.Sprintf(":%d", registryagent.Port),
		registryagent.EnvStorageRoot:    registryagent.DefaultStorageRoot,
		registryagent.EnvCredentialsDir: registryagent.DefaultCredentialsDir,
	}, agentEnv)
	regConfig := byName(objs, "ConfigMap", "serverless-docker-registry-config").Object["data"].(map[string]any)["config.yml"].(string)
	var parsed map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(regConfig), &parsed))
	storage := parsed["storage"].(map[string]any)
	assert.Equal(t, map[string]any{"enabled": true}, storage["delete"], "manifests are deleted through the API")
	assert.NotContains(t, storage, "cache", "a cached descriptor would outlive a GC'd blob")
	pvc := byName(objs, "PersistentVolumeClaim", "serverless-docker-registry")
	size, _, _ := unstructured.NestedString(pvc.Object, "spec", "resources", "requests", "storage")
	assert.Equal(t, "30Gi", size, "an existing volume keeps its size")
	for _, rt := range v1alpha2.Runtimes() {
		df := byName(objs, "ConfigMap", "dockerfile-"+string(rt)).Object["data"].(map[string]any)["Dockerfile"].(string)
		assert.True(t, strings.HasPrefix(df, "ARG base_image=europe-docker.pkg.dev/kyma-project/prod/function-runtime-"+string(rt)+":1.13.0\n"), rt)
	}

	// One controller writes at a time, at one replica too: a replaced Pod
	// runs for moments beside its successor.
	for _, v := range []variant{vs[1], vs[5]} { // replicas 1, 2
		objs = v.render(t, r)
		assert.Equal(t, "true", env(byName(objs, "Deployment", "serverless-ctrl-mngr"))["APP_LEADER_ELECTION_ENABLED"], v.name)
		role := typed[rbacv1.Role](t, byName(objs, "Role", "serverless-leader-election"))
		assert.True(t, slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, "coordination.k8s.io") && slices.Contains(r.Resources, "leases")
		}), "%s: the leader election Role grants the Lease", v.name)
	}
}

// Every kind the chart renders must be watched, or its drift goes unnoticed.
func TestEveryRenderedKindIsWatched(t *testing.T) {
	watched := map[string]bool{}
	for _, k := range kinds.Managed() {
		watched[k.GVK.GroupKind().String()] = true
	}
	r := renderer(t)
	for _, v := range variants() {
		for _, o := range v.render(t, r) {
			assert.True(t, watched[o.GroupVersionKind().GroupKind().String()], "%s renders %s, which the manager does not watch", v.name, o.GetKind())
		}
	}
}

// The chart no longer renders webhooks, but an install by the previous chart
// (tests/e2e/testdata/chart-previous, webhook on) may hold them: the manager
// must still manage their kinds, or the upgrade's prune and the uninstall
// would never see them.
func TestPreviousChartWebhooksAreManagedKinds(t *testing.T) {
	managed := map[string]bool{}
	for _, k := range kinds.Managed() {
		managed[k.GVK.GroupKind().String()] = true
	}
	chrt, err := render.LoadChart(os.DirFS(filepath.Join(repo.MustRoot(), "tests", "e2e", "testdata", "chart-previous")))
	require.NoError(t, err)
	v := variant{name: "previous", facts: values.Facts{Nodes: 3}, extra: map[string]any{"webhook": map[string]any{"enabled": true}}}
	hooks := 0
	for _, o := range v.render(t, render.New(chrt, nil)) {
		assert.True(t, managed[o.GroupVersionKind().GroupKind().String()], "the previous chart renders %s, which the manager does not manage", o.GetKind())
		if strings.HasSuffix(o.GetKind(), "WebhookConfiguration") {
			hooks++
		}
	}
	assert.Equal(t, 2, hooks, "the previous chart's webhook configurations")
}

// Kubernetes itself validates every rendered object (server-side dry run).
func TestRenderedObjectsPassServerSideDryRun(t *testing.T) {
	env := testenv.Start(t, "charts/serverless/crds")
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kyma-system"}}))
	r := renderer(t)
	for _, v := range variants() {
		t.Run(v.name, func(t *testing.T) {
			for _, o := range v.render(t, r) {
				if o.GetKind() == "CustomResourceDefinition" {
					continue // installed for real by testenv
				}
				err := env.Client.Create(ctx, o.DeepCopy(), client.DryRunAll)
				assert.NoError(t, err, "%s %s", o.GetKind(), o.GetName())
			}
		})
	}
}

// helm lint (the Helm v3 CLI built by hack/tools.sh) accepts the chart with
// the defaults and with each switch on.
func TestHelmLint(t *testing.T) {
	helm := filepath.Join(repo.MustRoot(), "bin", "assets", "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("no helm at %s: run `make tools` first", helm)
	}
	sets := [][]string{
		nil,
		{"dockerRegistry.enableInternal=true"},
		{"networkPolicies.enabled=true", "controller.replicas=2"},
		{"busola.enabled=false", "controller.logLevel=debug"},
	}
	for _, set := range sets {
		args := []string{"lint", "--strict", filepath.Join(repo.MustRoot(), "charts", "serverless")}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		out, err := exec.Command(helm, args...).CombinedOutput()
		assert.NoError(t, err, "helm %s:\n%s", strings.Join(args, " "), out)
	}
	out, err := exec.Command(helm, "lint", filepath.Join(repo.MustRoot(), "charts", "serverless"), "--set", "controller.logLevel=loud").CombinedOutput()
	assert.Error(t, err, "the schema must reject a bad log level")
	assert.Contains(t, string(out), "/controller/logLevel")
}

func kindNames(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind())
	}
	sort.Strings(out)
	return out
}

func TestVariantsRenderWhatTheySwitch(t *testing.T) {
	r := renderer(t)
	count := map[string]map[string]int{}
	for _, v := range variants() {
		count[v.name] = map[string]int{}
		for _, k := range kindNames(v.render(t, r)) {
			count[v.name][k]++
		}
	}
	assert.Zero(t, count["default"]["PersistentVolumeClaim"])
	assert.Equal(t, 1, count["internal-registry"]["PersistentVolumeClaim"])
	assert.Equal(t, 3, count["internal-registry"]["Deployment"], "controller, activator, registry")
	assert.Equal(t, 7, count["network-policies"]["NetworkPolicy"])
	assert.Zero(t, count["default"]["NetworkPolicy"])
	// No admission webhook (README: Why no admission webhook); the manager
	// still knows the kinds to prune what an older chart installed.
	for name, c := range count {
		assert.Zero(t, c["ValidatingWebhookConfiguration"]+c["MutatingWebhookConfiguration"], name)
	}
}

// Buildless mode renders nothing that only builds use: no Dockerfiles, no
// Function ServiceAccount, no registry Secret unless the internal registry
// stays; the controller gets buildless mode and the buildless presets.
func TestBuildlessRendersNoBuildObjects(t *testing.T) {
	r := renderer(t)
	byVariant := map[string][]*unstructured.Unstructured{}
	for _, v := range variants() {
		byVariant[v.name] = v.render(t, r)
	}
	names := func(objs []*unstructured.Unstructured) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetKind()+"/"+o.GetName())
		}
		return out
	}
	build, buildless := names(byVariant["default"]), names(byVariant["buildless"])
	for _, rt := range v1alpha2.Runtimes() {
		assert.Contains(t, build, "ConfigMap/dockerfile-"+string(rt))
		assert.NotContains(t, buildless, "ConfigMap/dockerfile-"+string(rt))
	}
	for _, name := range []string{"ServiceAccount/serverless-function", "Secret/" + module.RegistrySecretName} {
		assert.Contains(t, build, name)
		assert.NotContains(t, buildless, name)
	}
	withRegistry := names(byVariant["buildless-internal-registry"])
	assert.Contains(t, withRegistry, "Secret/"+module.RegistrySecretName, "the internal registry keeps its credentials")
	assert.Contains(t, withRegistry, "Deployment/serverless-docker-registry")
	assert.NotContains(t, withRegistry, "ServiceAccount/serverless-function")

	resourceConfig := func(objs []*unstructured.Unstructured) string {
		return env(find(t, objs, "Deployment", "serverless-ctrl-mngr"))["APP_FUNCTION_RESOURCE_CONFIG"]
	}
	var rc struct {
		Function struct {
			Resources struct {
				Presets map[string]map[string]string `json:"presets"`
			} `json:"resources"`
		} `json:"function"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(resourceConfig(byVariant["default"])), &rc))
	assert.Equal(t, "192Mi", rc.Function.Resources.Presets["XS"]["limitMemory"], "build mode keeps 1.8.4's presets")
	require.NoError(t, yaml.Unmarshal([]byte(resourceConfig(byVariant["buildless"])), &rc))
	assert.Equal(t, "256Mi", rc.Function.Resources.Presets["XS"]["limitMemory"], "buildless mode has 1.13's presets")
}

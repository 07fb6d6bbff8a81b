package render_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/tests/support/cliext"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// cliExtension reads the `kyma function` commands from the ConfigMap the
// chart renders, as the kyma CLI reads them from the cluster.
func cliExtension(t *testing.T) *cliext.Extension {
	t.Helper()
	objs := variants()[0].render(t, renderer(t))
	cm := find(t, objs, "ConfigMap", "serverless.function.cli")
	require.Equal(t, cliext.LabelExtensionValue, cm.GetLabels()[cliext.LabelExtension])
	require.Equal(t, cliext.Version, cm.GetLabels()[cliext.LabelExtensionVersion])
	raw, ok, err := unstructured.NestedString(cm.Object, "data", cliext.DataKey)
	require.NoError(t, err)
	require.True(t, ok, "the ConfigMap has data.%s", cliext.DataKey)
	ext, err := cliext.Parse([]byte(raw))
	require.NoError(t, err)
	return ext
}

type releaseCommand struct {
	Command []string         `json:"command"`
	Uses    string           `json:"uses"`
	Args    *cliext.Args     `json:"args"`
	Flags   []map[string]any `json:"flags"`
}

// Clusters that switch from release 1.13 keep every `kyma function`
// command, subcommand and flag of its extension: same name, action,
// argument, type, shorthand and default.
func TestCLIExtensionOffersRelease113Commands(t *testing.T) {
	ext := cliExtension(t)
	assert.Equal(t, "function", ext.Word())
	raw, err := os.ReadFile(filepath.Join("testdata", "cli-release-1.13.yaml"))
	require.NoError(t, err)
	var release []releaseCommand
	require.NoError(t, yaml.UnmarshalStrict(raw, &release))
	require.NotEmpty(t, release)
	for _, rc := range release {
		t.Run(strings.Join(rc.Command, " "), func(t *testing.T) {
			cmd, err := ext.Command(rc.Command...)
			require.NoError(t, err)
			assert.Equal(t, rc.Uses, cmd.Uses, "action")
			if rc.Args == nil {
				assert.Nil(t, cmd.Args, "takes no argument")
			} else if assert.NotNil(t, cmd.Args, "takes an argument") {
				assert.Equal(t, *rc.Args, *cmd.Args, "argument")
			}
			for _, want := range rc.Flags {
				name := want["name"].(string)
				got, ok := cmd.Flag(name)
				if !assert.True(t, ok, "--%s", name) {
					continue
				}
				assert.Equal(t, want["type"], got.Type, "--%s type", name)
				shorthand, _ := want["shorthand"].(string)
				assert.Equal(t, shorthand, got.Shorthand, "--%s shorthand", name)
				if def, compared := want["default"]; compared {
					if def == nil {
						assert.Nil(t, got.Default, "--%s has no default", name)
					} else if assert.NotNil(t, got.Default, "--%s default", name) {
						assert.Equal(t, def, *got.Default, "--%s default", name)
					}
				}
			}
		})
	}
}

// Every command that writes a Function, filled the way the CLI fills it
// from flags, gives a Function of the expected content that the API server
// accepts; get and delete address the named Function, eject asks the
// controller's Pods for it.
func TestCLIExtensionCommandsMakeValidFunctions(t *testing.T) {
	ext := cliExtension(t)
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	jsSource := "module.exports = {\n  main: async function (event, context) {\n    return 'multi-line';\n  }\n}\n"
	pySource := "def main(event, context):\n    return 'multi-line'\n"
	pkg := file("package.json", "{\n  \"dependencies\": {\n    \"is-number\": \"7.0.0\"\n  }\n}\n")
	js := file("handler.js", jsSource)
	py := file("handler.py", pySource)
	reqs := file("requirements.txt", "requests==2.32.3\n")

	env := testenv.Start(t, filepath.Join("charts", "serverless", "crds"))
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cli"}}))

	tests := []struct {
		name    string
		command []string
		flags   map[string][]string
		want    func(t *testing.T, fn *v1alpha2.Function)
	}{
		{name: "create with defaults", command: []string{"create"}, want: func(t *testing.T, fn *v1alpha2.Function) {
			assert.Equal(t, v1alpha2.Runtime("nodejs24"), fn.Spec.Runtime, "release 1.13 creates Node.js 24")
			assert.Equal(t, "default", fn.Namespace)
			assert.Equal(t, ptr.To[int32](1), fn.Spec.Replicas)
			assert.Empty(t, fn.Spec.RuntimeImageOverride)
			assert.Empty(t, fn.Annotations, "no Istio annotation unless asked")
			assert.Contains(t, fn.Spec.Source.Inline.Source, "module.exports")
			assert.JSONEq(t, `{"dependencies": {}}`, fn.Spec.Source.Inline.Dependencies, "release 1.13's dependencies")
		}},
		{name: "create python312 without files", command: []string{"create"}, flags: map[string][]string{"runtime": {"python312"}}, want: func(t *testing.T, fn *v1alpha2.Function) {
			assert.Equal(t, v1alpha2.Runtime("python312"), fn.Spec.Runtime)
			assert.True(t, strings.HasPrefix(fn.Spec.Source.Inline.Source, "def main(event, context):\n    return "), "a Python handler:\n%s", fn.Spec.Source.Inline.Source)
			assert.NotContains(t, fn.Spec.Source.Inline.Source, "module.exports")
			assert.Empty(t, strings.TrimSpace(fn.Spec.Source.Inline.Dependencies), "no requirements")
		}},
		{name: "create python312 with dependencies only", command: []string{"create"}, flags: map[string][]string{"runtime": {"python312"}, "dependencies": {reqs}}, want: func(t *testing.T, fn *v1alpha2.Function) {
			assert.Contains(t, fn.Spec.Source.Inline.Source, "def main(event, context):")
			assert.Equal(t, "requests==2.32.3\n", fn.Spec.Source.Inline.Dependencies)
		}},
		{name: "create nodejs22 with source only", command: []string{"create"}, flags: map[string][]string{"runtime": {"nodejs22"}, "source": {js}}, want: func(t *testing.T, fn *v1alpha2.Function) {
			assert.Equal(t, v1alpha2.Runtime("nodejs22"), fn.Spec.Runtime)
			assert.Equal(t, jsSource, fn.Spec.Source.Inline.Source)
			assert.JSONEq(t, `{"dependencies": {}}`, fn.Spec.Source.Inline.Dependencies)
		}},
		{name: "create nodejs20 without files", command: []string{"create"}, flags: map[string][]string{"runtime": {"nodejs20"}}, want: func(t *testing.T, fn *v1alpha2.Function) {
			assert.Contains(t, fn.Spec.Source.Inline.Source, "module.exports")
			assert.JSONEq(t, `{"dependencies": {}}`, fn.Spec.Source.Inline.Dependencies)
		}},
		{name: "create with every flag", command: []string{"create"}, flags: map[string][]string{
			"namespace": {"cli"}, "runtime": {"python312"}, "source": {py}, "dependencies": {reqs}, "replicas": {"2"},
			"env": {"A=1", "B=two"}, "secret-mount": {"creds=/etc/creds"}, "istio-injection": {"true"},
			"runtime-image-override": {"registry.example.com/base/python:3.12"},
		}, want: func(t *testing.T, fn *v1alpha2.Function) {
			assert.Equal(t, v1alpha2.Runtime("python312"), fn.Spec.Runtime)
			assert.Equal(t, "cli", fn.Namespace)
			assert.Equal(t, ptr.To[int32](2), fn.Spec.Replicas)
			assert.Equal(t, pySource, fn.Spec.Source.Inline.Source, "a multi-line handler arrives unchanged")
			assert.Equal(t, "requests==2.32.3\n", fn.Spec.Source.Inline.Dependencies)
			assert.Equal(t, []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "two"}}, fn.Spec.Env)
			assert.Equal(t, []v1alpha2.SecretMount{{SecretName: "creds", MountPath: "/etc/creds"}}, fn.Spec.SecretMounts)
			assert.Equal(t, map[string]string{"sidecar.istio.io/inject": "true"}, fn.Annotations)
			assert.Equal(t, "registry.example.com/base/python:3.12", fn.Spec.RuntimeImageOverride)
		}},
		{name: "create nodejs with defaults", command: []string{"create", "nodejs"}, want: func(t *testing.T, fn *v1alpha2.Function) {
			assert.Equal(t, v1alpha2.Runtime("nodejs22"), fn.Spec.Runtime, "--version defaults to 22")
			assert.Contains(t, fn.Spec.Source.Inline.Dependencies, `"dependencies"`)
		}},
		{name: "create nodejs from files", command: []string{"create", "nodejs"}, flags: map[string][]string{
			"version": {"24"}, "source": {js}, "dependencies": {pkg}, "istio-injection": {"false"},
		}, want: func(t *testing.T, fn *v1alpha2.Function) {
			assert.Equal(t, v1alpha2.Runtime("nodejs24"), fn.Spec.Runtime)
			assert.Equal(t, jsSource, fn.Spec.Source.Inline.Source)
			assert.Contains(t, fn.Spec.Source.Inline.Dependencies, `"is-number": "7.0.0"`)
			assert.Equal(t, map[string]string{"sidecar.istio.io/inject": "false"}, fn.Annotations)
		}},
		{name: "create nodejs 20", command: []string{"create", "nodejs"}, flags: map[string][]string{"version": {"20"}}, want: func(t *testing.T, fn *v1alpha2.Function) {
			assert.Equal(t, v1alpha2.Runtime("nodejs20"), fn.Spec.Runtime)
		}},
		{name: "create python with defaults", command: []string{"create", "python"}, want: func(t *testing.T, fn *v1alpha2.Function) {
			assert.Equal(t, v1alpha2.Runtime("python312"), fn.Spec.Runtime)
			assert.Contains(t, fn.Spec.Source.Inline.Source, "def main(event, context):")
		}},
		{name: "create python from files", command: []string{"create", "python"}, flags: map[string][]string{
			"source": {py}, "dependencies": {reqs}, "secret-mount": {"a=/a", "b=/b"}, "dry-run": {"true"},
		}, want: func(t *testing.T, fn *v1alpha2.Function) {
			assert.Equal(t, pySource, fn.Spec.Source.Inline.Source)
			assert.Equal(t, []v1alpha2.SecretMount{{SecretName: "a", MountPath: "/a"}, {SecretName: "b", MountPath: "/b"}}, fn.Spec.SecretMounts)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := ext.Command(tt.command...)
			require.NoError(t, err)
			cfg, err := cmd.Configure(ptr.To("cli-fn"), tt.flags)
			require.NoError(t, err)
			wantDryRun := len(tt.flags["dry-run"]) > 0
			assert.Equal(t, wantDryRun, cfg["dryRun"], "dryRun follows --dry-run")
			resource, ok := cfg["resource"].(map[string]any)
			require.True(t, ok, "the configuration has a resource: %v", cfg)
			raw, err := yaml.Marshal(resource)
			require.NoError(t, err)
			fn := &v1alpha2.Function{}
			require.NoError(t, yaml.UnmarshalStrict(raw, fn), "a Function with only known fields:\n%s", raw)
			assert.Equal(t, "cli-fn", fn.Name)
			tt.want(t, fn)

			obj := &unstructured.Unstructured{Object: resource}
			if obj.GetNamespace() == "default" {
				obj.SetNamespace("cli") // envtest has no default namespace of ours
			}
			assert.NoError(t, env.Client.Create(ctx, obj, client.DryRunAll), "the API server accepts:\n%s", raw)
		})
	}

	// The language is read from the runtime's name: a Python runtime the
	// CRD does not know yet gets a Python handler too.
	t.Run("create a later python runtime", func(t *testing.T) {
		cmd, err := ext.Command("create")
		require.NoError(t, err)
		cfg, err := cmd.Configure(ptr.To("cli-fn"), map[string][]string{"runtime": {"python314"}})
		require.NoError(t, err)
		inline := cfg["resource"].(map[string]any)["spec"].(map[string]any)["source"].(map[string]any)["inline"].(map[string]any)
		assert.Contains(t, inline["source"], "def main(event, context):")
		assert.Empty(t, strings.TrimSpace(inline["dependencies"].(string)))
	})

	t.Run("get one", func(t *testing.T) {
		cmd, err := ext.Command("get")
		require.NoError(t, err)
		cfg, err := cmd.Configure(ptr.To("cli-fn"), map[string][]string{"namespace": {"cli"}, "output": {"yaml"}})
		require.NoError(t, err)
		assert.Equal(t, "yaml", cfg["output"])
		assert.Equal(t, false, cfg["fromAllNamespaces"])
		assertAddresses(t, cfg["resource"], "cli", "cli-fn")
	})
	t.Run("get all", func(t *testing.T) {
		cmd, err := ext.Command("get")
		require.NoError(t, err)
		cfg, err := cmd.Configure(nil, map[string][]string{"all-namespaces": {"true"}})
		require.NoError(t, err)
		assert.Equal(t, true, cfg["fromAllNamespaces"])
		assertAddresses(t, cfg["resource"], "default", "")
		assert.NotEmpty(t, cfg["outputParameters"])
	})
	t.Run("delete", func(t *testing.T) {
		cmd, err := ext.Command("delete")
		require.NoError(t, err)
		cfg, err := cmd.Configure(ptr.To("cli-fn"), map[string][]string{"namespace": {"cli"}})
		require.NoError(t, err)
		assert.Equal(t, false, cfg["dryRun"])
		assertAddresses(t, cfg["resource"], "cli", "cli-fn")
	})
	t.Run("eject", func(t *testing.T) {
		cmd, err := ext.Command("eject")
		require.NoError(t, err)
		cfg, err := cmd.Configure(ptr.To("cli-fn"), map[string][]string{"namespace": {"cli"}, "dir": {"out"}, "target-app-name": {"app"}})
		require.NoError(t, err)
		assert.Equal(t, "out", cfg["outputDir"])
		req := cfg["request"].(map[string]any)["parameters"].(map[string]any)
		assert.Equal(t, map[string]any{"name": "cli-fn", "namespace": "cli", "targetAppName": "app"}, req)
		// The Pods the CLI calls are the Function controller's.
		target := cfg["targetPod"].(map[string]any)
		deploy := typed[appsv1.Deployment](t, find(t, variants()[0].render(t, renderer(t)), "Deployment", "serverless-ctrl-mngr"))
		assert.Equal(t, deploy.Namespace, target["namespace"])
		for k, v := range target["selector"].(map[string]any) {
			assert.Equal(t, v, deploy.Spec.Template.Labels[k], "the controller's Pods carry %s", k)
		}
		assert.Equal(t, "/internal/function/eject/", target["path"])
		assert.Equal(t, "12137", target["port"])
	})
	t.Run("init", func(t *testing.T) {
		for _, tc := range []struct {
			command []string
			flags   map[string][]string
			handler string
		}{
			{[]string{"init"}, nil, "handler.js"},
			{[]string{"init"}, map[string][]string{"runtime": {"python312"}}, "handler.py"},
			{[]string{"init", "nodejs"}, nil, "handler.js"},
			{[]string{"init", "python"}, map[string][]string{"dir": {"fn"}}, "handler.py"},
		} {
			cmd, err := ext.Command(tc.command...)
			require.NoError(t, err)
			cfg, err := cmd.Configure(nil, tc.flags)
			require.NoError(t, err)
			runtimes := cfg["runtimes"].(map[string]any)
			use := cfg["useRuntime"].(string)
			require.Contains(t, runtimes, use, "%v: the runtime it writes has files", tc.command)
			assert.Equal(t, tc.handler, runtimes[use].(map[string]any)["handlerFilename"], "%v", tc.command)
			if d := tc.flags["dir"]; d != nil {
				assert.Equal(t, d[0], cfg["outputDir"])
			}
		}
	})
}

func assertAddresses(t *testing.T, resource any, namespace, name string) {
	t.Helper()
	r := resource.(map[string]any)
	assert.Equal(t, v1alpha2.GroupVersion.String(), r["apiVersion"])
	assert.Equal(t, "Function", r["kind"])
	meta := r["metadata"].(map[string]any)
	assert.Equal(t, namespace, meta["namespace"])
	gotName, _ := meta["name"].(string) // absent or null: every Function
	assert.Equal(t, name, gotName)
}

// `kyma function explain` says what each mode makes of a Function: a build
// Job and an autoscaler only in build mode, the autoscaler only with
// spec.scaleConfig; buildless mode builds nothing; scale to zero in both.
// The ConfigMap is the same in both modes, so the text must hold in each.
func TestCLIExplainSaysWhatEachModeDoes(t *testing.T) {
	ext := cliExtension(t)
	cmd, err := ext.Command("explain")
	require.NoError(t, err)
	cfg, err := cmd.Configure(nil, nil)
	require.NoError(t, err)
	out, ok := cfg["output"].(string)
	require.True(t, ok, "explain prints a text: %v", cfg)

	// The text is an introduction, one item per mode, and what holds in
	// both; the items start with "- Build mode" and "- Buildless mode".
	intro, rest, ok := strings.Cut(out, "\n- Build mode:")
	require.True(t, ok, "an item for build mode:\n%s", out)
	build, rest, ok := strings.Cut(rest, "\n- Buildless mode:")
	require.True(t, ok, "an item for buildless mode after build mode's:\n%s", out)
	buildless, both, ok := strings.Cut(rest, "\nIn both modes")
	require.True(t, ok, "what holds in both modes after the items:\n%s", out)
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	intro, build, buildless, both = flat(intro), flat(build), flat(buildless), flat(both)

	for name, text := range map[string]string{"the introduction": intro, "what holds in both modes": both} {
		assert.NotContains(t, text, "Job", "%s names no build Job: %s", name, text)
		assert.NotRegexp(t, `(?i)autoscaler`, text, "%s names no autoscaler: %s", name, text)
	}
	assert.Contains(t, intro, "spec.functionMode", "the introduction says where the mode is set")

	assert.Contains(t, build, "a Job builds an image")
	assert.Regexp(t, `HorizontalPodAutoscaler runs only if spec\.scaleConfig sets maxReplicas above both minReplicas and 1`, build,
		"build mode's autoscaler only with scaleConfig, as resources.HPA makes it")

	assert.Contains(t, buildless, "nothing is built, there is no build Job")
	assert.Contains(t, buildless, "No autoscaler runs")
	assert.NotContains(t, buildless, "a Job builds")

	assert.Contains(t, both, "spec.scaleConfig.minReplicas 0 scales an idle Function to zero")
	for _, rt := range v1alpha2.Runtimes() {
		assert.Contains(t, both, string(rt), "explain lists runtime %s", rt)
	}

	// The help texts of the other commands (delete's names what goes with
	// a Function) claim build Jobs and autoscalers for build mode only.
	var walk func(e *cliext.Extension)
	walk = func(e *cliext.Extension) {
		for _, text := range []string{e.Metadata.Description, e.Metadata.DescriptionLong} {
			if strings.Contains(text, "Job") || strings.Contains(strings.ToLower(text), "autoscaler") {
				assert.Contains(t, text, "in build mode", "%q: %s", e.Word(), text)
			}
		}
		for i := range e.SubCommands {
			walk(&e.SubCommands[i])
		}
	}
	walk(ext)
}

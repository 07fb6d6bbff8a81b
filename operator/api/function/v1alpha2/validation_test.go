package v1alpha2_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/tests/support/repo"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

const inline = `"source":{"inline":{"source":"module.exports = { main: () => 'hi' }"}}`

// inlineBound is the most UTF-8 bytes source and dependencies may have together.
const inlineBound = 524288

// withInline is a Function spec with inline code, JSON-encoded.
func withInline(runtime, source, deps string) string {
	in := map[string]any{"source": source}
	if deps != "" {
		in["dependencies"] = deps
	}
	data, err := json.Marshal(map[string]any{"runtime": runtime, "source": map[string]any{"inline": in}})
	if err != nil {
		panic(err)
	}
	return string(data)
}

// withEnv is an inline Node.js Function spec that sets the env names given.
func withEnv(names ...string) string {
	env := make([]map[string]string, 0, len(names))
	for _, n := range names {
		env = append(env, map[string]string{"name": n, "value": "mine"})
	}
	data, err := json.Marshal(env)
	if err != nil {
		panic(err)
	}
	return `{"runtime":"nodejs22",` + inline + `,"env":` + string(data) + `}`
}

// withGit is a Function spec with a Git source at url.
func withGit(url string) string {
	return `{"runtime":"nodejs22","source":{"gitRepository":{"url":"` + url + `","baseDir":"/","reference":"main"}}}`
}

// withOverride is an inline Node.js Function spec with runtimeImageOverride.
func withOverride(image string) string {
	data, err := json.Marshal(image)
	if err != nil {
		panic(err)
	}
	return `{"runtime":"nodejs22",` + inline + `,"runtimeImageOverride":` + string(data) + `}`
}

// withMount is an inline Python Function spec with one Secret mounted at path.
func withMount(path string) string {
	data, err := json.Marshal(path)
	if err != nil {
		panic(err)
	}
	return `{"runtime":"python312","source":{"inline":{"source":"def main(event, context):\n    return 1\n"}},"secretMounts":[{"secretName":"s","mountPath":` + string(data) + `}]}`
}

// jsCode is realistic handler code of exactly n bytes, rich in what JSON
// escapes (<, >, &, quotes, newlines), so the stored object is larger than n.
func jsCode(n int) string {
	line := "  if (a < b && c > d) { return \"x\"; } // ok\n"
	code := strings.Repeat(line, n/len(line)+1)
	return code[:n]
}

// The Function CRD the chart installs rejects bad Functions at admission,
// each with a message that names the field.
func TestFunctionValidation(t *testing.T) {
	env := testenv.Start(t, "charts/serverless/crds")
	ctx := context.Background()

	tests := []struct {
		name    string
		spec    string
		wantErr string // substring; empty = accepted
	}{
		{"inline nodejs22", `{"runtime":"nodejs22",` + inline + `}`, ""},
		{"git python312", `{"runtime":"python312","source":{"gitRepository":{"url":"https://github.com/example/fn.git","baseDir":"/fn","reference":"main","auth":{"type":"basic","secretName":"git-creds"}}}}`, ""},
		{"profile and env", `{"runtime":"nodejs20",` + inline + `,"env":[{"name":"MY_VAR","value":"1"}],"resourceConfiguration":{"function":{"profile":"M"},"build":{"profile":"fast"}},"scaleConfig":{"minReplicas":1,"maxReplicas":3},"labels":{"team":"a"}}`, ""},
		{"custom resources", `{"runtime":"nodejs22",` + inline + `,"resourceConfiguration":{"function":{"resources":{"limits":{"cpu":"200m","memory":"128Mi"}}}}}`, ""},
		{"runtime missing", `{` + inline + `}`, "spec.runtime"},
		{"runtime unknown", `{"runtime":"nodejs12",` + inline + `}`, "spec.runtime"},
		{"source missing", `{"runtime":"nodejs22"}`, "spec.source"},
		{"both sources", `{"runtime":"nodejs22","source":{"inline":{"source":"x"},"gitRepository":{"url":"https://git.example/fn.git","baseDir":"/","reference":"main"}}}`, "spec.source: use exactly one of gitRepository and inline"},
		{"no source kind", `{"runtime":"nodejs22","source":{}}`, "spec.source: use exactly one of gitRepository and inline"},
		{"empty inline source", `{"runtime":"nodejs22","source":{"inline":{"source":""}}}`, "spec.source.inline.source"},
		{"git without baseDir", `{"runtime":"nodejs22","source":{"gitRepository":{"url":"https://git.example/fn.git","reference":"main"}}}`, "spec.source.gitRepository.baseDir is required"},
		{"git with blank reference", `{"runtime":"nodejs22","source":{"gitRepository":{"url":"https://git.example/fn.git","baseDir":"/","reference":"  "}}}`, "spec.source.gitRepository.reference is required"},
		{"git auth type", `{"runtime":"nodejs22","source":{"gitRepository":{"url":"https://git.example/fn.git","baseDir":"/","reference":"main","auth":{"type":"token","secretName":"s"}}}}`, "spec.source.gitRepository.auth.type"},
		{"git auth blank secret", `{"runtime":"nodejs22","source":{"gitRepository":{"url":"https://git.example/fn.git","baseDir":"/","reference":"main","auth":{"type":"key","secretName":" "}}}}`, "spec.source.gitRepository.auth.secretName is required"},
		// Reserved env names, release 1.13's: the message names the variable
		// (of several, the first in the reserved list's order).
		{"reserved env FUNC_RUNTIME", withEnv("FUNC_RUNTIME"), "spec.env: FUNC_RUNTIME may not be set: the names FUNC_RUNTIME, FUNC_HANDLER, FUNC_HANDLER_SOURCE, FUNC_HANDLER_DEPENDENCIES, FUNC_PORT, MOD_NAME, NODE_PATH and PYTHONPATH are reserved"},
		{"reserved env FUNC_HANDLER", withEnv("FUNC_HANDLER"), "spec.env: FUNC_HANDLER may not be set"},
		{"reserved env FUNC_HANDLER_SOURCE", withEnv("FUNC_HANDLER_SOURCE"), "spec.env: FUNC_HANDLER_SOURCE may not be set"},
		{"reserved env FUNC_HANDLER_DEPENDENCIES", withEnv("FUNC_HANDLER_DEPENDENCIES"), "spec.env: FUNC_HANDLER_DEPENDENCIES may not be set"},
		{"reserved env FUNC_PORT", withEnv("FUNC_PORT"), "spec.env: FUNC_PORT may not be set"},
		{"reserved env MOD_NAME", withEnv("MOD_NAME"), "spec.env: MOD_NAME may not be set"},
		{"reserved env NODE_PATH", withEnv("NODE_PATH"), "spec.env: NODE_PATH may not be set"},
		{"reserved env PYTHONPATH", withEnv("PYTHONPATH"), "spec.env: PYTHONPATH may not be set"},
		{"reserved env among others", withEnv("GREETING", "FUNC_HANDLER_DEPENDENCIES", "LOG_LEVEL", "FUNC_HANDLER_SOURCE"), "spec.env: FUNC_HANDLER_SOURCE may not be set"},
		{"env names like reserved ones", withEnv("FUNC_HANDLER_SOURCES", "func_runtime", "MY_PYTHONPATH", "FUNC_TIMEOUT", "FUNC_NAME"), ""},
		{"reserved label prefix", `{"runtime":"nodejs22",` + inline + `,"labels":{"serverless.kyma-project.io/x":"y"}}`, "spec.labels: the prefix serverless.kyma-project.io/ is reserved"},
		{"long label name", `{"runtime":"nodejs22",` + inline + `,"labels":{"` + strings.Repeat("l", 64) + `":"y"}}`, "spec.labels: label names must be shorter than 64 characters"},
		{"reserved annotation prefix", `{"runtime":"nodejs22",` + inline + `,"annotations":{"serverless.kyma-project.io/x":"y"}}`, "spec.annotations: the prefix serverless.kyma-project.io/ is reserved"},
		{"profile and resources", `{"runtime":"nodejs22",` + inline + `,"resourceConfiguration":{"function":{"profile":"S","resources":{"limits":{"cpu":"1"}}}}}`, "spec.resourceConfiguration.function: use exactly one of profile and resources"},
		{"function profile unknown", `{"runtime":"nodejs22",` + inline + `,"resourceConfiguration":{"function":{"profile":"XXL"}}}`, "spec.resourceConfiguration.function.profile must be one of"},
		{"build profile unknown", `{"runtime":"nodejs22",` + inline + `,"resourceConfiguration":{"build":{"profile":"turbo"}}}`, "spec.resourceConfiguration.build.profile must be one of"},
		{"min above max, as release 1.13 admits it", `{"runtime":"nodejs22",` + inline + `,"scaleConfig":{"minReplicas":3,"maxReplicas":2}}`, ""},
		{"min replicas zero: scale to zero", `{"runtime":"nodejs22",` + inline + `,"scaleConfig":{"minReplicas":0,"maxReplicas":2}}`, ""},
		{"negative min replicas", `{"runtime":"nodejs22",` + inline + `,"scaleConfig":{"minReplicas":-1,"maxReplicas":2}}`, "spec.scaleConfig.minReplicas"},
		{"negative replicas", `{"runtime":"nodejs22",` + inline + `,"replicas":-1}`, "spec.replicas"},
		{"template labels", `{"runtime":"nodejs22",` + inline + `,"template":{"labels":{"a":"b"}}}`, "spec.template: labels and annotations are not supported"},
		{"secret mount without path", `{"runtime":"nodejs22",` + inline + `,"secretMounts":[{"secretName":"s","mountPath":""}]}`, "spec.secretMounts[0].mountPath"},

		// What release 1.13 accepts besides 1.8.4's Functions.
		{"inline nodejs24", `{"runtime":"nodejs24",` + inline + `}`, ""},
		{"security contexts", `{"runtime":"nodejs24",` + inline + `,"podSecurityContext":{"runAsUser":2000,"fsGroup":2000,"seccompProfile":{"type":"RuntimeDefault"}},"containerSecurityContext":{"runAsNonRoot":true,"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}`, ""},
		{"env fileKeyRef", `{"runtime":"nodejs22",` + inline + `,"env":[{"name":"FROM_FILE","valueFrom":{"fileKeyRef":{"volumeName":"tmp-dir","path":"app.env","key":"A","optional":true}}}]}`, ""},
		{"pod security context of the wrong type", `{"runtime":"nodejs22",` + inline + `,"podSecurityContext":{"runAsUser":"root"}}`, "spec.podSecurityContext.runAsUser"},
		{"container security context capabilities not a list", `{"runtime":"nodejs22",` + inline + `,"containerSecurityContext":{"capabilities":{"drop":"ALL"}}}`, "spec.containerSecurityContext.capabilities.drop"},
		{"fileKeyRef without key", `{"runtime":"nodejs22",` + inline + `,"env":[{"name":"FROM_FILE","valueFrom":{"fileKeyRef":{"volumeName":"tmp-dir","path":"app.env"}}}]}`, "spec.env[0].valueFrom.fileKeyRef.key"},

		// runtimeImageOverride: an image reference a registry client can read.
		{"image override with registry and tag", withOverride("europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs22:1.8.4"), ""},
		{"image override with port and digest", withOverride("localhost:5000/team/node@sha256:" + strings.Repeat("ab", 32)), ""},
		{"image override tag and digest", withOverride("registry.example.com:5000/base:v1.2-slim@sha256:" + strings.Repeat("0f", 32)), ""},
		{"image override short", withOverride("node:22-alpine"), ""},
		{"image override empty", withOverride(""), ""},
		{"image override shell", withOverride("x; rm -rf /"), "spec.runtimeImageOverride must be an image reference"},
		{"image override upper-case repository", withOverride("registry.example.com/Team/node:22"), "spec.runtimeImageOverride must be an image reference"},
		{"image override empty tag", withOverride("node:"), "spec.runtimeImageOverride must be an image reference"},
		{"image override short digest", withOverride("node@sha256:abc"), "spec.runtimeImageOverride must be an image reference"},
		{"image override space", withOverride("node 22"), "spec.runtimeImageOverride must be an image reference"},

		// secretMounts: absolute clean paths that hide none of the runtime's code and dependencies.
		{"mount in etc", withMount("/etc/secrets/db"), ""},
		{"mount beside the code", withMount("/usr/src/app/function/config"), ""},
		{"mount beside python code", withMount("/kubeless/secrets"), ""},
		{"mount at root", withMount("/"), "spec.secretMounts[0].mountPath: Invalid value: must be an absolute path other than /"},
		{"mount relative", withMount("secrets"), "spec.secretMounts[0].mountPath: Invalid value: must be an absolute path"},
		{"mount trailing slash", withMount("/etc/secrets/"), "spec.secretMounts[0].mountPath: Invalid value: must be an absolute path"},
		{"mount with dot-dot", withMount("/etc/../usr/src/app"), "spec.secretMounts[0].mountPath: Invalid value: must be an absolute path"},
		{"mount over node code", withMount("/usr/src/app/function"), "spec.secretMounts[0].mountPath: Invalid value: must not hide the runtime's code or dependencies"},
		{"mount above node code", withMount("/usr/src"), "spec.secretMounts[0].mountPath: Invalid value: must not hide"},
		{"mount over the runtime server's modules", withMount("/usr/src/app/node_modules"), "spec.secretMounts[0].mountPath: Invalid value: must not hide"},
		{"mount inside node dependencies", withMount("/usr/src/app/function/node_modules/lodash"), "spec.secretMounts[0].mountPath: Invalid value: must not hide"},
		{"mount over python code", withMount("/kubeless"), "spec.secretMounts[0].mountPath: Invalid value: must not hide"},
		{"mount above python dependencies", withMount("/usr/local/lib"), "spec.secretMounts[0].mountPath: Invalid value: must not hide"},
		{"mount inside python dependencies", withMount("/usr/local/lib/python3.12/site-packages/requests"), "spec.secretMounts[0].mountPath: Invalid value: must not hide"},

		// Git URLs: https, http, ssh and the SCP-like form; nothing else.
		{"git url http", withGit("http://git.example:8080/team/fn.git"), ""},
		{"git url ssh with port", withGit("ssh://git@git.example:2222/team/fn.git"), ""},
		{"git url scp-like", withGit("git@github.com:team/fn.git"), ""},
		{"git url file", withGit("file:///var/run/secrets"), "spec.source.gitRepository.url must be an https://, http:// or ssh:// URL"},
		{"git url git protocol", withGit("git://git.example/team/fn.git"), "spec.source.gitRepository.url must be"},
		{"git url other scheme", withGit("ftp://git.example/team/fn.git"), "spec.source.gitRepository.url must be"},
		{"git url local path", withGit("/srv/git/fn.git"), "spec.source.gitRepository.url must be"},
		{"git url without host", withGit("https:///fn.git"), "spec.source.gitRepository.url must be"},
		{"git url with space", withGit("https://git.example/team/fn.git --upload-pack=x"), "spec.source.gitRepository.url must be"},
		{"git url scp-like with scheme", withGit("git@git.example://team/fn.git"), "spec.source.gitRepository.url must be"},

		// Replicas: at most 1000.
		{"replicas at bound", `{"runtime":"nodejs22",` + inline + `,"replicas":1000}`, ""},
		{"replicas over bound", `{"runtime":"nodejs22",` + inline + `,"replicas":1001}`, "spec.replicas"},
		{"max replicas over bound", `{"runtime":"nodejs22",` + inline + `,"scaleConfig":{"minReplicas":1,"maxReplicas":1001}}`, "spec.scaleConfig.maxReplicas"},

		// Inline code: source and dependencies together at most 512 KiB of UTF-8.
		{"inline at bound", withInline("nodejs22", jsCode(inlineBound-20), `{"name":"fn","x":1}`+" "), ""},
		{"inline over bound", withInline("nodejs22", jsCode(inlineBound-20), `{"name":"fn","xy":1}`+" "), "spec.source.inline: source and dependencies together must not exceed 524288 bytes"},
		{"inline bound counts bytes", withInline("python312", strings.Repeat("é", inlineBound/2+1), ""), "spec.source.inline: source and dependencies together must not exceed"},
		{"source over max length", withInline("python312", strings.Repeat("x", inlineBound+1), ""), "spec.source.inline.source"},

		// Node.js dependencies look like a package.json object, as the controller checks.
		{"node dependencies object", withInline("nodejs20", "x", "\n  {\"dependencies\":{}}\n"), ""},
		{"node dependencies blank", withInline("nodejs22", "x", " \n "), ""},
		{"node dependencies array", withInline("nodejs22", "x", `["lodash"]`), "spec.source.inline.dependencies must be a package.json object"},
		{"node dependencies requirements", withInline("nodejs20", "x", "requests==2.32.0"), "spec.source.inline.dependencies must be a package.json object"},
		{"node dependencies unclosed", withInline("nodejs22", "x", `{"dependencies":{"lodash":"4"`), "spec.source.inline.dependencies must be a package.json object"},
		{"python requirements", withInline("python312", "x", "requests==2.32.0\n"), ""},
	}
	bad := 0
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var spec map[string]any
			require.NoError(t, json.Unmarshal([]byte(tt.spec), &spec))
			fn := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "serverless.kyma-project.io/v1alpha2", "kind": "Function",
				"metadata": map[string]any{"namespace": "default", "name": fmt.Sprintf("fn-%d", i)},
				"spec":     spec,
			}}
			err := env.Client.Create(ctx, fn)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err, "the API server must reject %s", tt.spec)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
		if tt.wantErr != "" {
			bad++
		}
	}
	assert.GreaterOrEqual(t, bad, 15)

	// The bound keeps the object storable: code at the bound that JSON
	// escapes heavily, plus 250 KiB of annotations (e.g. kubectl's
	// last-applied-configuration), is accepted by etcd (1.5 MiB per request).
	var atBound map[string]any
	require.NoError(t, json.Unmarshal([]byte(withInline("nodejs22", jsCode(inlineBound-2), "{}")), &atBound))
	big := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serverless.kyma-project.io/v1alpha2", "kind": "Function",
		"metadata": map[string]any{"namespace": "default", "name": "at-bound",
			"annotations": map[string]any{"example.com/notes": strings.Repeat("n", 250*1024)}},
		"spec": atBound,
	}}
	require.NoError(t, env.Client.Create(ctx, big), "a Function at the inline bound is stored")

	// Scaling through the scale subresource is bounded as spec.replicas.
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "at-bound"}, Spec: autoscalingv1.ScaleSpec{Replicas: 1001}}
	err := env.Client.SubResource("scale").Update(ctx, big, client.WithSubResourceBody(scale))
	require.Error(t, err, "scaling to 1001 replicas")
	assert.Contains(t, err.Error(), "spec.replicas")
	scale.Spec.Replicas = 1000
	assert.NoError(t, env.Client.SubResource("scale").Update(ctx, big, client.WithSubResourceBody(scale)))

	// The samples: the good one is accepted, the bad one rejected.
	for file, wantErr := range map[string]string{"function-sample.yaml": "", "function-invalid.yaml": "spec.source: use exactly one"} {
		data, err := os.ReadFile(filepath.Join(repo.MustRoot(), "config", "samples", file))
		require.NoError(t, err)
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal(data, &u.Object))
		err = env.Client.Create(ctx, u)
		if wantErr == "" {
			assert.NoError(t, err, file)
		} else if assert.Error(t, err, file) {
			assert.Contains(t, err.Error(), wantErr, file)
		}
	}
}

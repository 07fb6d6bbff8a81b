package eject_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/eject"
)

func server(t *testing.T, fns ...*v1alpha2.Function) *eject.Server {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha2.AddToScheme(scheme))
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, fn := range fns {
		b = b.WithObjects(fn)
	}
	cfg := &config.Config{Buildless: config.BuildlessConfig{RuntimeImages: map[v1alpha2.Runtime]string{
		"nodejs22": "registry.example.com/node22:1", "python312": "registry.example.com/py312:1",
	}}}
	return &eject.Server{Reader: b.Build(), Config: cfg, Log: logr.Discard()}
}

func inlineFn(name, rt, source, deps string) *v1alpha2.Function {
	return &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"},
		Spec: v1alpha2.FunctionSpec{
			Runtime: v1alpha2.Runtime(rt),
			Labels:  map[string]string{"team": "a"},
			Env:     []corev1.EnvVar{{Name: "GREETING", Value: "hi"}},
			Source:  v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: source, Dependencies: deps}},
		},
	}
}

func get(t *testing.T, s *eject.Server, method string, params url.Values) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(method, eject.Path+"?"+params.Encode(), nil)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	return rec.Code, rec.Body.Bytes()
}

func files(t *testing.T, body []byte) (eject.Answer, map[string]string) {
	t.Helper()
	var a eject.Answer
	require.NoError(t, json.Unmarshal(body, &a))
	out := map[string]string{}
	for _, f := range a.Files {
		data, err := base64.StdEncoding.DecodeString(f.Data)
		require.NoError(t, err, f.Name)
		out[f.Name] = string(data)
	}
	return a, out
}

// An inline Function comes back as its handler, its dependencies and an
// application of its own name and labels that runs it without a build.
func TestEjectInlineFunction(t *testing.T) {
	js := "module.exports = { main: () => 'hi' }\n"
	py := "def main(event, context):\n    return 'hi'\n"
	s := server(t,
		inlineFn("node", "nodejs22", js, `{"dependencies":{"is-number":"7.0.0"}}`),
		inlineFn("py", "python312", py, ""))
	tests := []struct {
		name, fn, app, wantApp, wantImage string
		want                              map[string]string // file → content; nil = only present
	}{
		{name: "nodejs with dependencies", fn: "node", wantApp: "node-ejected", wantImage: "registry.example.com/node22:1",
			want: map[string]string{"handler.js": js, "package.json": `{"dependencies":{"is-number":"7.0.0"}}`}},
		{name: "python without dependencies, named app", fn: "py", app: "my-app", wantApp: "my-app", wantImage: "registry.example.com/py312:1",
			want: map[string]string{"handler.py": py}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := get(t, s, http.MethodGet, url.Values{"name": {tt.fn}, "namespace": {"team"}, "targetAppName": {tt.app}})
			require.Equal(t, http.StatusOK, code, string(body))
			a, got := files(t, body)
			assert.Contains(t, a.OutputMessage, tt.wantApp)
			for name, content := range tt.want {
				assert.Equal(t, content, got[name], name)
			}
			assert.Len(t, got, len(tt.want)+3, "handler, dependencies if any, two manifests and README.md: %v", got)
			assert.Contains(t, got["README.md"], tt.wantApp)

			deploy := &appsv1.Deployment{}
			require.NoError(t, yaml.UnmarshalStrict([]byte(got["k8s/deployment.yaml"]), deploy))
			assert.Equal(t, "Deployment", deploy.Kind)
			assert.Equal(t, tt.wantApp, deploy.Name)
			assert.Equal(t, "team", deploy.Namespace)
			assert.Empty(t, deploy.OwnerReferences, "the application is not the Function's child")
			assert.Empty(t, deploy.GenerateName)
			sel := map[string]string{"app.kubernetes.io/name": tt.wantApp, "app.kubernetes.io/instance": tt.wantApp}
			assert.Equal(t, sel, deploy.Spec.Selector.MatchLabels)
			for k := range deploy.Spec.Template.Labels {
				assert.NotContains(t, k, "serverless.kyma-project.io/", "the controller must not take the Pods for the Function's")
			}
			assert.Equal(t, "a", deploy.Spec.Template.Labels["team"], "the Function's own Pod labels stay")
			c := deploy.Spec.Template.Spec.Containers[0]
			assert.Equal(t, tt.wantImage, c.Image)
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			assert.Equal(t, "hi", env["GREETING"])
			assert.Equal(t, tt.want["handler.js"]+tt.want["handler.py"], env["FUNC_HANDLER_SOURCE"])

			svc := &corev1.Service{}
			require.NoError(t, yaml.UnmarshalStrict([]byte(got["k8s/service.yaml"]), svc))
			assert.Equal(t, tt.wantApp, svc.Name)
			assert.Equal(t, sel, svc.Spec.Selector)
			require.NotEmpty(t, svc.Spec.Ports)
			assert.Equal(t, int32(80), svc.Spec.Ports[0].Port)
		})
	}
}

// Bad requests get a clear message and status, as JSON the CLI prints.
func TestEjectRefuses(t *testing.T) {
	git := &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: "team"},
		Spec: v1alpha2.FunctionSpec{Runtime: "nodejs22", Source: v1alpha2.Source{GitRepository: &v1alpha2.GitRepositorySource{
			URL: "https://git.example/fn.git", Repository: v1alpha2.Repository{BaseDir: "/", Reference: "main"}}}},
	}
	noImage := inlineFn("node24", "nodejs24", "x", "")
	s := server(t, git, noImage)
	tests := []struct {
		name    string
		method  string
		params  url.Values
		status  int
		message string
	}{
		{"no name", http.MethodGet, url.Values{"namespace": {"team"}}, http.StatusBadRequest, "name and namespace are required"},
		{"bad app name", http.MethodGet, url.Values{"name": {"git"}, "namespace": {"team"}, "targetAppName": {"My_App"}}, http.StatusBadRequest, `targetAppName "My_App"`},
		{"missing Function", http.MethodGet, url.Values{"name": {"nope"}, "namespace": {"team"}}, http.StatusNotFound, "reading Function team/nope"},
		{"Git Function", http.MethodGet, url.Values{"name": {"git"}, "namespace": {"team"}}, http.StatusUnprocessableEntity, "only inline Functions can be ejected"},
		{"runtime without image", http.MethodGet, url.Values{"name": {"node24"}, "namespace": {"team"}}, http.StatusUnprocessableEntity, `no image is configured for runtime "nodejs24"`},
		{"POST", http.MethodPost, url.Values{"name": {"git"}, "namespace": {"team"}}, http.StatusMethodNotAllowed, "only GET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := get(t, s, tt.method, tt.params)
			assert.Equal(t, tt.status, code)
			var e struct {
				Error string `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &e), string(body))
			assert.Contains(t, e.Error, tt.message)
		})
	}
}

// An address in use costs the eject endpoint, not the controller.
func TestStartWithAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	s := server(t)
	s.Addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		require.Fail(t, "Start neither served nor returned on an address in use")
	}
}

// Start serves the endpoint until its context ends.
func TestStartServesUntilCancelled(t *testing.T) {
	// A free port: listen, note it, close, then let Start take it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	s := server(t, inlineFn("node", "nodejs22", "x", ""))
	s.Addr = addr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	var resp *http.Response
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err = http.Get("http://" + addr + eject.Path + "?name=node&namespace=team")
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the endpoint at %s did not answer in 10 s; last: %v", addr, err)
	}
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		require.Fail(t, "Start did not return after its context ended")
	}
}

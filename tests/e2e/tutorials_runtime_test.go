//go:build e2e

package e2e

// The tutorials about what a Function's runtime gives it: environment
// variables from ConfigMaps and Secrets, an image of its own, custom
// traces, events it sends. TestFunctionsSideBySide runs them
// (tutorialTests in tutorials_test.go).
// The local runtime images stand in for Kyma's: their event.tracer makes
// spans that go nowhere, so the traces tutorial is checked up to the
// Function answering, and event.emitCloudEvent posts to the Serverless
// CR's eventing endpoint, which the events tutorial's test points at a
// publisher proxy of its own.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/tests/docs"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

func (tu *tutorials) environmentVariables(t *testing.T, p docs.Page) {
	ns := tu.namespace(t, "tut-env")
	objs := objects(t, p, ns)
	object(t, objs, "ConfigMap", "hello-env-settings")
	object(t, objs, "Secret", "hello-env-token")
	tu.apply(t, ns, objs...)
	f := tu.f.in(t)
	f.waitRunning(ns, "hello-env")
	tu.answers(t, p, ns, "hello-env", "/", "Hello, Kyma! (language en, a token of 16 characters)")

	// The page's way to new values: a changed ConfigMap reaches the
	// Function once its Pods are deleted.
	cm := object(t, objs, "ConfigMap", "hello-env-settings").DeepCopy()
	require.NoError(t, unstructured.SetNestedField(cm.Object, "Hi", "data", "greeting"))
	tu.apply(t, ns, cm)
	tu.sh(t, p, ns, `kubectl delete pods -n "$NAMESPACE" -l serverless.kyma-project.io/function-name=hello-env,serverless.kyma-project.io/resource=deployment`)
	f.cluster.WaitForAnswer(t, 2*time.Minute, ns, "hello-env", "/", func(body string) bool {
		return body == "Hi, Kyma! (language en, a token of 16 characters)"
	}, f.dumpsFor(ns, "hello-env")...)
}

func (tu *tutorials) overrideRuntimeImage(t *testing.T, p docs.Page) {
	ns := tu.namespace(t, "tut-override")
	objs := objects(t, p, ns)
	require.Len(t, objs, 2, "%s applies the Function, then the Function with its override", p.Path)
	f := tu.f.in(t)
	tu.apply(t, ns, objs[0])
	f.waitRunning(ns, "hello-override")
	tu.answers(t, p, ns, "hello-override", "/", "Hello from my own runtime image!")

	// The page builds an image on the one the Function runs; here it is
	// that image, copied to the repository the page pushes to (in the
	// real node's registry instead of the reader's).
	// The page shows this command twice: before and after the override.
	showImage := sameCommand(t, p, `kubectl get function -n "$NAMESPACE" hello-override -o jsonpath='{.status.runtimeImage}'`, 2)
	base, err := tu.run(t, ns, showImage)
	require.NoError(t, err, base)
	registry := f.cluster.NodeRegistry()
	require.True(t, strings.HasPrefix(base, registry+"/"), "the Function runs a runtime image of the node's registry %s: %q", registry, base)
	says(t, p, "FROM europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs22:")
	says(t, p, "docker push registry.example.com/my-runtimes/nodejs22:1.0.0")
	withOverride := objs[1]
	override, _, err := unstructured.NestedString(withOverride.Object, "spec", "runtimeImageOverride")
	require.NoError(t, err)
	require.Equal(t, "registry.example.com/my-runtimes/nodejs22:1.0.0", override, "%s: the override is the image the page pushes", p.Path)
	own := strings.Replace(override, "registry.example.com", registry, 1)
	require.NoError(t, crane.Copy(base, own, crane.Insecure, crane.WithContext(t.Context())), "copying %s to %s", base, own)
	require.NoError(t, unstructured.SetNestedField(withOverride.Object, own, "spec", "runtimeImageOverride"))
	tu.apply(t, ns, withOverride)

	fn := f.waitFunction(ns, "hello-override", "to run on "+own, 5*time.Minute, func(fn *v1alpha2.Function) bool {
		return fn.Status.RuntimeImage == own && (isRunning(fn) || isRunningBuildless(fn))
	})
	assert.Equal(t, own, fn.Spec.RuntimeImageOverride)
	shown, err := tu.run(t, ns, showImage)
	require.NoError(t, err, shown)
	assert.Equal(t, own, shown)
	tu.answers(t, p, ns, "hello-override", "/", "Hello from my own runtime image!")
}

// sameCommand is the command line of the page that starts with prefix,
// which the page shows n times, always alike.
func sameCommand(t *testing.T, p docs.Page, prefix string, n int) string {
	t.Helper()
	var found []string
	for _, c := range p.Commands() {
		if strings.HasPrefix(c, prefix) {
			found = append(found, c)
		}
	}
	require.Len(t, found, n, "%s: the commands starting with %q", p.Path, prefix)
	for _, c := range found[1:] {
		require.Equal(t, found[0], c, "%s: the commands starting with %q", p.Path, prefix)
	}
	return found[0]
}

func (tu *tutorials) customTraces(t *testing.T, p docs.Page) {
	ns := tu.namespace(t, "tut-traces")
	objs := objects(t, p, ns)
	object(t, objs, "Function", "traced-nodejs")
	object(t, objs, "Function", "traced-python")
	tu.apply(t, ns, objs...)
	f := tu.f.in(t)
	f.waitRunning(ns, "traced-nodejs")
	f.waitRunning(ns, "traced-python")
	tu.answers(t, p, ns, "traced-nodejs", "/", "Order 3211213 checked")
	says(t, p, `kubectl port-forward -n "$NAMESPACE" svc/traced-python 8080:80`)
	f.cluster.WaitForAnswer(t, 2*time.Minute, ns, "traced-python", "/", func(body string) bool { return body == "Order 3211213 checked" }, f.dumpsFor(ns, "traced-python")...)
}

// published is a request the publisher proxy stand-in received.
type published struct {
	contentType string
	body        []byte
}

// publisherProxy stands in for the Eventing module's publisher proxy at
// the real node's address, where Pods reach it, until t ends: it answers
// 204 to every POST to /publish and hands on what it got.
func publisherProxy(t *testing.T, host string) (string, <-chan published) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	require.NoError(t, err)
	got := make(chan published, 16)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/publish" {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case got <- published{r.Header.Get("Content-Type"), body}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/publish", got
}

func (tu *tutorials) sendEvents(t *testing.T, p docs.Page) {
	f := tu.f.in(t)
	endpoint, events := publisherProxy(t, f.cluster.NodeIP())

	// The module's Functions publish to the Serverless CR's eventing
	// endpoint: this test's publisher proxy, until the test ends.
	cr := &v1alpha1.Serverless{}
	require.NoError(t, f.c.Get(t.Context(), client.ObjectKey{Namespace: framework.ManagerNamespace, Name: "default"}, cr))
	previous := "null"
	if cr.Spec.Eventing != nil {
		b, err := json.Marshal(cr.Spec.Eventing)
		require.NoError(t, err)
		previous = string(b)
	}
	patch := func(eventing string) (string, error) {
		return tu.run(t, "", `kubectl patch serverless default -n kyma-system --type merge -p '{"spec":{"eventing":`+eventing+`}}'`)
	}
	t.Cleanup(func() { _, _ = patch(previous) })
	out, err := patch(`{"endpoint":"` + endpoint + `"}`)
	require.NoError(t, err, out)
	f.waitFor("default", "the eventing endpoint "+endpoint, 3*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.EventingEndpoint == endpoint && cr.Status.ObservedGeneration == cr.Generation
	})

	ns := tu.namespace(t, "tut-send")
	tu.apply(t, ns, object(t, objects(t, p, ns), "Function", "order-service"))
	f.waitFunction(ns, "order-service", "to run with PUBLISHER_PROXY_ADDRESS "+endpoint, 5*time.Minute, func(fn *v1alpha2.Function) bool {
		if !isRunning(fn) && !isRunningBuildless(fn) {
			return false
		}
		for _, e := range f.deployment(ns, "order-service").Spec.Template.Spec.Containers[0].Env {
			if e.Name == "PUBLISHER_PROXY_ADDRESS" {
				return e.Value == endpoint
			}
		}
		return false
	})

	portForward(t, p, "order-service")
	order := curlData.FindStringSubmatch(mustCommand(t, p, "curl -X POST http://localhost:8080/"))
	require.NotNil(t, order, "%s: the order the page sends", p.Path)
	const want = "Published order.created.v1 for order 3211213"
	says(t, p, want)
	framework.WaitFor(t, time.Minute, "the Function to publish the order", func(ctx context.Context) (bool, string, error) {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, err := f.cluster.CallService(rctx, ns, "order-service", http.MethodPost, "/", http.Header{"Content-Type": {"application/json"}}, []byte(order[1]))
		if err != nil {
			return false, err.Error(), nil
		}
		return r.Status == http.StatusOK && r.Body == want, fmt.Sprintf("HTTP %d: %s", r.Status, r.Body), nil
	}, f.dumpsFor(ns, "order-service")...)

	var ev published
	select {
	case ev = <-events:
	case <-time.After(10 * time.Second):
		require.Fail(t, "the publisher proxy received no event, though the Function answered")
	}
	assert.Equal(t, "application/cloudevents+json", ev.contentType)
	var ce map[string]any
	require.NoError(t, json.Unmarshal(ev.body, &ce), "the event: %s", ev.body)
	assert.Equal(t, "order.created.v1", ce["type"])
	assert.Equal(t, "myshop", ce["source"])
	assert.Equal(t, "v1", ce["eventtypeversion"])
	assert.Equal(t, "1.0", ce["specversion"])
	assert.NotEmpty(t, ce["id"])
	assert.Equal(t, map[string]any{"orderCode": "3211213"}, ce["data"])
}

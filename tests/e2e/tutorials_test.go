//go:build e2e

package e2e

// The user tutorials (docs/user/tutorials) as a user follows them: the
// YAML of each tutorial's `kubectl apply` steps, read from its page
// (tests/docs reads the here-documents), is applied into a namespace of
// its own on the real node, the commands the check depends on are run as
// written (bash, this repository's kubectl, NAMESPACE set as the first
// step sets it), and the Function answers what the page says it answers,
// through its Service on port 80 as `kubectl port-forward svc/<fn> 8080:80`
// reaches it. Placeholders a reader replaces (a repository URL, a registry
// host, credentials) are replaced by the servers this test runs: a Git
// server (basic auth and SSH), an npm registry and an image registry on
// the real node's address. What only other Kyma modules do (API Gateway,
// Eventing) is checked as far as it concerns this module: their CRDs are
// stand-ins that store the objects, which must name the Function's
// Service and port 80, and that Service answers, also to the CloudEvent
// the tutorial publishes.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/tests/docs"
	"github.com/kyma-project/serverless-manager/tests/framework"
	"github.com/kyma-project/serverless-manager/tests/support/gittest"
	"github.com/kyma-project/serverless-manager/tests/support/loopback"
)

// tutorials is the install the tutorials are followed on.
type tutorials struct{ f *fnEnv }

// tutorialTests follows every tutorial on the install f (tests/docs checks
// that each page of docs/user/tutorials is named here). Those in
// sideBySide work in a namespace of their own and leave the Serverless CR
// alone; those in alone change the CR (each restores it) and run one at a
// time, with nothing else running.
func tutorialTests(f *fnEnv) (sideBySide, alone []subtest) {
	tu := &tutorials{f: f}
	follow := func(page string, run func(t *testing.T, p docs.Page)) subtest {
		return subtest{page, func(t *testing.T) {
			p, err := docs.Read(docs.Tutorials + "/" + page)
			require.NoError(t, err)
			run(t, p)
		}}
	}
	// Longest first, as TestFunctionsSideBySide orders its subtests.
	sideBySide = []subtest{
		follow("01-51-scale-function-to-zero.md", tu.scaleToZero),
		follow("01-95-manage-functions-with-kyma-cli.md", tu.kymaCLI),
		follow("01-93-override-runtime-image.md", tu.overrideRuntimeImage),
		follow("01-20-create-git-function.md", tu.gitFunction),
		follow("01-92-customize-function-traces.md", tu.customTraces),
		follow("01-41-inject-environment-variables.md", tu.environmentVariables),
		follow("01-80-expose-function.md", tu.expose),
		follow("01-50-scale-function.md", tu.scale),
		follow("01-11-create-inline-python-function.md", tu.inlinePython),
		follow("01-90-subscribe-to-events.md", tu.events),
		follow("01-10-create-inline-nodejs-function.md", tu.inlineNodejs),
		follow("01-40-inject-secrets.md", tu.secrets),
		follow("01-30-use-private-npm-registry.md", tu.privateNPMRegistry),
	}
	alone = []subtest{
		follow("01-70-use-external-registry.md", tu.externalRegistry),
		follow("01-91-send-events.md", tu.sendEvents),
	}
	return sideBySide, alone
}

// namespace is the tutorial's NAMESPACE: a new namespace whose Pods run on
// the real node, deleted when t ends.
func (tu *tutorials) namespace(t *testing.T, prefix string) string {
	return tu.f.cluster.Namespace(t, prefix)
}

// objects are what the page's `kubectl apply` steps create, with NAMESPACE
// set to ns.
func objects(t *testing.T, p docs.Page, ns string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := p.Applied(map[string]string{"NAMESPACE": ns})
	require.NoError(t, err)
	require.NotEmpty(t, objs, "%s applies YAML", p.Path)
	return objs
}

// object is the one applied object of kind and name.
func object(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	require.Failf(t, "missing object", "the tutorial applies no %s %s", kind, name)
	return nil
}

func (tu *tutorials) apply(t *testing.T, ns string, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		require.NoError(t, tu.f.cluster.Apply(t.Context(), ns, o.DeepCopy()), "applying %s %s", o.GetKind(), o.GetName())
	}
}

// sh runs one command of the page as the reader runs it: bash, this
// repository's kubectl first on the PATH, NAMESPACE and KUBECONFIG set.
func (tu *tutorials) sh(t *testing.T, p docs.Page, ns, prefix string) string {
	t.Helper()
	cmd, err := p.Command(prefix)
	require.NoError(t, err)
	out, err := tu.run(t, ns, cmd)
	require.NoError(t, err, "%s: %s\n%s", p.Path, cmd, out)
	return out
}

func (tu *tutorials) run(t *testing.T, ns, command string) (string, error) {
	return tu.runIn(t, ns, "", command)
}

// runIn is run in the working directory dir ("": the test's).
func (tu *tutorials) runIn(t *testing.T, ns, dir, command string) (string, error) {
	// Not t.Context(): it is canceled before t's cleanups run, and the
	// cleanups that restore the Serverless CR run commands too.
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	root := tu.f.cluster.Root()
	c := exec.CommandContext(ctx, "bash", "-c", command)
	c.Dir = dir
	c.Env = append(os.Environ(),
		"NAMESPACE="+ns,
		"KUBECONFIG="+tu.f.cluster.KubeconfigPath(),
		"PATH="+filepath.Join(root, "bin", "assets")+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := c.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// says requires the page to show text: what the test checks is what the
// page tells the reader.
func says(t *testing.T, p docs.Page, text string) {
	t.Helper()
	require.Contains(t, p.Text, text, "%s says %q", p.Path, text)
}

// portForward requires the page's port forward to the Function's Service
// at port 80, which CallService reaches at the Service's cluster IP.
func portForward(t *testing.T, p docs.Page, name string) {
	t.Helper()
	require.Contains(t, p.Commands(), `kubectl port-forward -n "$NAMESPACE" svc/`+name+` 8080:80`, "%s forwards a port to the Service's port 80", p.Path)
}

// answers waits until the Function's Service answers GET path with want,
// which the page must show.
func (tu *tutorials) answers(t *testing.T, p docs.Page, ns, name, path, want string) {
	t.Helper()
	portForward(t, p, name)
	says(t, p, want)
	f := tu.f.in(t)
	f.cluster.WaitForAnswer(t, 2*time.Minute, ns, name, path, func(body string) bool { return body == want }, f.dumpsFor(ns, name)...)
}

func (tu *tutorials) inlineNodejs(t *testing.T, p docs.Page) {
	ns := tu.namespace(t, "tut-nodejs")
	tu.apply(t, ns, objects(t, p, ns)...)
	tu.f.in(t).waitRunning(ns, "hello-nodejs")
	says(t, p, `curl "http://localhost:8080/?name=Kyma"`)
	tu.answers(t, p, ns, "hello-nodejs", "/?name=Kyma", "Hello, Kyma!")
}

func (tu *tutorials) inlinePython(t *testing.T, p docs.Page) {
	ns := tu.namespace(t, "tut-python")
	tu.apply(t, ns, objects(t, p, ns)...)
	f := tu.f.in(t)
	f.waitRunning(ns, "hello-python")
	portForward(t, p, "hello-python")
	var shown map[string]any
	for _, b := range p.Blocks() {
		if b.Lang() == "json" {
			require.NoError(t, json.Unmarshal([]byte(b.Body), &shown), "%s: the answer the page shows", p.Path)
		}
	}
	require.NotEmpty(t, shown, "%s shows the JSON answer", p.Path)
	f.cluster.WaitForAnswer(t, 2*time.Minute, ns, "hello-python", "/", func(body string) bool {
		var got map[string]any
		return json.Unmarshal([]byte(body), &got) == nil && assert.ObjectsAreEqual(shown, got)
	}, f.dumpsFor(ns, "hello-python")...)
}

func (tu *tutorials) gitFunction(t *testing.T, p docs.Page) {
	files := p.Files()
	require.Contains(t, files, "handler.js")
	require.Contains(t, files, "package.json")
	content := map[string]string{}
	for name, body := range files {
		content["hello-git/"+name] = body
	}
	nodeIP := tu.f.cluster.NodeIP()

	// Basic auth: smart HTTP at the node's address, which Pods reach.
	const user, token = "reader", "t0ken-for-the-tutorial"
	httpSrv := gittest.NewHTTPServer(t, user, token, gittest.ListenOn(nodeIP))
	httpRepo := httpSrv.Repo(t, "functions")
	httpCommit := httpRepo.Commit(content, "hello from git")

	// SSH: the server listens on loopback; a forwarder gives Pods the
	// node's address.
	key, pub := gittest.NewClientKey(t)
	sshSrv := gittest.NewSSHServer(t, pub)
	sshRepo := sshSrv.Repo(t, "functions")
	sshCommit := sshRepo.Commit(content, "hello from git")
	fwd := forward(t, nodeIP, sshSrv.Addr)
	host, port, err := net.SplitHostPort(fwd)
	require.NoError(t, err)
	knownHosts := fmt.Sprintf("[%s]:%s %s", host, port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshSrv.HostKey))))

	ns := tu.namespace(t, "tut-git")
	objs := objects(t, p, ns)
	creds := object(t, objs, "Secret", "git-credentials")
	require.NoError(t, unstructured.SetNestedField(creds.Object, user, "stringData", "username"))
	require.NoError(t, unstructured.SetNestedField(creds.Object, token, "stringData", "password"))
	basic := object(t, objs, "Function", "hello-git")
	require.NoError(t, unstructured.SetNestedField(basic.Object, httpRepo.URL, "spec", "source", "gitRepository", "url"))
	withKey := object(t, objs, "Function", "hello-git-ssh")
	require.NoError(t, unstructured.SetNestedField(withKey.Object, "ssh://git@"+fwd+"/functions.git", "spec", "source", "gitRepository", "url"))

	// The page creates the key's Secret with kubectl from the reader's
	// files; the same Secret here, from this test's key and host.
	_, err = p.Command("kubectl create secret generic git-ssh-key -n \"$NAMESPACE\" --from-file=key=")
	require.NoError(t, err)
	says(t, p, "--from-literal=knownHosts=")
	require.NoError(t, tu.f.c.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-ssh-key"},
		StringData: map[string]string{"key": key, "knownHosts": knownHosts}}))
	tu.apply(t, ns, objs...)

	f := tu.f.in(t)
	f.waitRunning(ns, "hello-git")
	f.waitRunning(ns, "hello-git-ssh")
	commit := tu.sh(t, p, ns, `kubectl get function -n "$NAMESPACE" hello-git -o jsonpath='{.status.gitRepository.commit}'`)
	assert.Equal(t, httpCommit, commit, "the status names the commit pushed")
	fn := &v1alpha2.Function{}
	require.NoError(t, f.fcs.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "hello-git-ssh"}, fn))
	assert.Equal(t, sshCommit, fn.Status.GitRepository.Commit)
	tu.answers(t, p, ns, "hello-git", "/", "Hello from Git!")
	f.cluster.WaitForAnswer(t, 2*time.Minute, ns, "hello-git-ssh", "/", func(body string) bool { return body == "Hello from Git!" }, f.dumpsFor(ns, "hello-git-ssh")...)
}

// forward accepts connections at host:0 and copies them to target, until
// t ends; it returns the address it listens at.
func forward(t *testing.T, host, target string) string {
	t.Helper()
	return loopback.Serve(t, host, func(in net.Conn) {
		out, err := net.Dial("tcp", target)
		if err != nil {
			_ = in.Close()
			return
		}
		done := make(chan struct{})
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
		}
		go func() { pipe(out, in); close(done) }()
		pipe(in, out)
		<-done
	})
}

func (tu *tutorials) privateNPMRegistry(t *testing.T, p docs.Page) {
	index, ok := p.Files()["index.js"]
	require.True(t, ok, "%s shows the package's index.js", p.Path)
	reg, err := tu.f.cluster.StartNPMRegistry(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Close() })
	require.NoError(t, reg.Publish(framework.NPMPackage{Name: "greeting-lib", Version: "1.0.0", Main: "index.js",
		Files: map[string][]byte{"index.js": []byte(index)}}))

	ns := tu.namespace(t, "tut-npm")
	objs := objects(t, p, ns)
	secret := object(t, objs, "Secret", "serverless-package-registry-config")
	npmrc, found, err := unstructured.NestedString(secret.Object, "stringData", ".npmrc")
	require.NoError(t, err)
	require.True(t, found, "the Secret has the key .npmrc")
	regHost := strings.TrimSuffix(strings.TrimPrefix(reg.URL, "http://"), "/")
	npmrc = strings.ReplaceAll(npmrc, "https://npm.example.com/", reg.URL)
	npmrc = strings.ReplaceAll(npmrc, "//npm.example.com/", "//"+regHost+"/")
	require.NotContains(t, npmrc, "example.com", "every address of the page's .npmrc is replaced")
	require.NoError(t, unstructured.SetNestedField(secret.Object, npmrc, "stringData", ".npmrc"))
	tu.apply(t, ns, objs...)

	tu.f.in(t).waitRunning(ns, "hello-private")
	tu.answers(t, p, ns, "hello-private", "/", "Hello, Kyma, from a private package!")
	assert.Positive(t, reg.Downloads("greeting-lib", "1.0.0"), "the package came from the private registry")
}

func (tu *tutorials) secrets(t *testing.T, p docs.Page) {
	ns := tu.namespace(t, "tut-secrets")
	tu.apply(t, ns, objects(t, p, ns)...)
	tu.f.in(t).waitRunning(ns, "hello-secrets")
	tu.answers(t, p, ns, "hello-secrets", "/", "API_KEY has 14 characters, the token file has 12 characters")
}

func (tu *tutorials) scale(t *testing.T, p docs.Page) {
	ns := tu.namespace(t, "tut-scale")
	objs := objects(t, p, ns)
	require.Len(t, objs, 2, "%s applies the Function, then the Function with scaleConfig", p.Path)
	f := tu.f.in(t)
	tu.apply(t, ns, objs[0])
	f.waitRunning(ns, "hello-scale")

	tu.sh(t, p, ns, `kubectl scale function hello-scale -n "$NAMESPACE" --replicas=2`)
	framework.WaitFor(t, 2*time.Minute, "two replicas in the Function's status", func(context.Context) (bool, string, error) {
		out, err := tu.run(t, ns, mustCommand(t, p, `kubectl get function hello-scale -n "$NAMESPACE" -o jsonpath='{.status.replicas}'`))
		return err == nil && out == "2", out, nil
	}, f.dumpsFor(ns, "hello-scale")...)
	f.waitFunction(ns, "hello-scale", "to be Running with two replicas", 2*time.Minute, func(fn *v1alpha2.Function) bool {
		return isRunning(fn) && len(f.functionPods("hello-scale", ns)) == 2
	})
	portForward(t, p, "hello-scale")
	says(t, p, "Hello from hello-scale-")
	f.cluster.WaitForAnswer(t, time.Minute, ns, "hello-scale", "/", func(body string) bool {
		return strings.HasPrefix(body, "Hello from hello-scale-")
	}, f.dumpsFor(ns, "hello-scale")...)

	tu.apply(t, ns, objs[1])
	var hpa autoscalingv2.HorizontalPodAutoscaler
	framework.WaitFor(t, 2*time.Minute, "the Function's HorizontalPodAutoscaler", func(ctx context.Context) (bool, string, error) {
		var list autoscalingv2.HorizontalPodAutoscalerList
		if err := f.c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha2.LabelFunctionName: "hello-scale"}); err != nil {
			return false, "", err
		}
		if len(list.Items) != 1 {
			return false, fmt.Sprintf("%d autoscalers", len(list.Items)), nil
		}
		hpa = list.Items[0]
		return true, "", nil
	}, f.dumpsFor(ns, "hello-scale")...)
	assert.Equal(t, int32(2), *hpa.Spec.MinReplicas)
	assert.Equal(t, int32(4), hpa.Spec.MaxReplicas)
	assert.Equal(t, "Function", hpa.Spec.ScaleTargetRef.Kind)
	assert.Equal(t, "hello-scale", hpa.Spec.ScaleTargetRef.Name)
	// The page says only the function container's CPU is measured.
	require.Len(t, hpa.Spec.Metrics, 1)
	assert.Equal(t, autoscalingv2.ContainerResourceMetricSourceType, hpa.Spec.Metrics[0].Type)
	if cr := hpa.Spec.Metrics[0].ContainerResource; assert.NotNil(t, cr, "a ContainerResource metric") {
		assert.Equal(t, "function", cr.Container)
		assert.Equal(t, corev1.ResourceCPU, cr.Name)
		assert.Equal(t, autoscalingv2.UtilizationMetricType, cr.Target.Type)
	}
	assert.Contains(t, tu.sh(t, p, ns, `kubectl get hpa -n "$NAMESPACE" -l serverless.kyma-project.io/function-name=hello-scale`), hpa.Name)
	f.waitFunction(ns, "hello-scale", "to keep running under its autoscaler", 2*time.Minute, func(fn *v1alpha2.Function) bool {
		return isRunning(fn) && fn.Status.Replicas >= 2
	})
}

// scaleToZero follows the page: the Function answers, goes to zero after
// its 20 s window (spec.replicas 0, Running True ScaledToZero, no Pod, the
// Service's cluster IP kept), and the page's calling Pod wakes it and
// prints its answer.
func (tu *tutorials) scaleToZero(t *testing.T, p docs.Page) {
	const name, answer = "hello-zero", "Hello from a Function that scales to zero!"
	ns := tu.namespace(t, "tut-zero")
	objs := objects(t, p, ns)
	fn := object(t, objs, "Function", name)
	assert.Equal(t, "20s", fn.GetAnnotations()[v1alpha2.AnnotationScaleToZeroAfter], "the page's idle window")
	// The page's YAML decodes numbers as float64.
	minReplicas, found, err := unstructured.NestedFieldNoCopy(fn.Object, "spec", "scaleConfig", "minReplicas")
	require.NoError(t, err)
	require.True(t, found, "the page sets spec.scaleConfig.minReplicas")
	require.EqualValues(t, 0, minReplicas)
	tu.apply(t, ns, objs...)
	f := tu.f.in(t)
	f.waitRunning(ns, name)
	says(t, p, "curl http://localhost:8080/")
	tu.answers(t, p, ns, name, "/", answer)
	svc := &corev1.Service{}
	require.NoError(t, f.c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, svc))
	clusterIP := svc.Spec.ClusterIP

	// No more calls: the activator sets spec.replicas to 0 after the
	// window, the controller drains and removes the Pod.
	tu.sh(t, p, ns, `kubectl wait function hello-zero -n "$NAMESPACE" --for=jsonpath='{.spec.replicas}'=0`)
	reason := mustCommand(t, p, `kubectl get function hello-zero -n "$NAMESPACE" -o jsonpath='{.status.conditions[?(@.type=="Running")].reason}'`)
	says(t, p, v1alpha2.ReasonScaledToZero)
	pods := mustCommand(t, p, `kubectl get pods -n "$NAMESPACE" -l serverless.kyma-project.io/function-name=hello-zero,serverless.kyma-project.io/resource=deployment`)
	says(t, p, "No resources found in default namespace.")
	framework.WaitFor(t, 2*time.Minute, "the Function at zero: Running "+v1alpha2.ReasonScaledToZero+" and no Pod", func(context.Context) (bool, string, error) {
		out, err := tu.run(t, ns, reason)
		if err != nil || out != v1alpha2.ReasonScaledToZero {
			return false, "Running reason: " + out, nil
		}
		out, err = tu.run(t, ns, pods)
		return err == nil && out == "No resources found in "+ns+" namespace.", "Pods: " + out, nil
	}, f.dumpsFor(ns, name)...)
	require.NoError(t, f.c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, svc))
	assert.Equal(t, clusterIP, svc.Spec.ClusterIP, "the Service keeps its cluster IP at zero")

	// The page's call from a Pod wakes the Function and prints its answer.
	t.Cleanup(func() { _, _ = tu.run(t, ns, `kubectl delete pod hello-zero-call -n "$NAMESPACE" --ignore-not-found`) })
	tu.sh(t, p, ns, `kubectl run hello-zero-call -n "$NAMESPACE"`)
	tu.sh(t, p, ns, `kubectl wait pod hello-zero-call -n "$NAMESPACE"`)
	assert.Equal(t, answer, tu.sh(t, p, ns, `kubectl logs hello-zero-call -n "$NAMESPACE"`), "the waking call's answer")
	// Within the window that the call started again.
	f.waitFunction(ns, name, "to run again after the wake", 15*time.Second, func(fn *v1alpha2.Function) bool {
		c := fn.Status.Condition(v1alpha2.ConditionRunning)
		return isRunning(fn) && c.Reason == v1alpha2.ReasonDeploymentReady && fn.Spec.Replicas != nil && *fn.Spec.Replicas >= 1
	})
	tu.sh(t, p, ns, `kubectl delete pod hello-zero-call -n "$NAMESPACE"`)
}

func mustCommand(t *testing.T, p docs.Page, prefix string) string {
	t.Helper()
	cmd, err := p.Command(prefix)
	require.NoError(t, err)
	return cmd
}

// Stand-ins of the CRDs of Kyma's API Gateway and Eventing modules and of
// the Kyma CR of Kyma's lifecycle manager: they store what the tutorials
// and runbooks apply and check nothing.
var standIns = []struct{ group, version, kind, plural string }{
	{"gateway.kyma-project.io", "v2", "APIRule", "apirules"},
	{"eventing.kyma-project.io", "v1alpha2", "Subscription", "subscriptions"},
	{"operator.kyma-project.io", "v1beta2", "Kyma", "kymas"},
}

// standInCRD installs the stand-in of kind until the test of tu ends.
func (tu *tutorials) standInCRD(t *testing.T, kind string) {
	t.Helper()
	installStandInCRD(t, tu.f.c, kind)
}

// installStandInCRD installs the stand-in of kind with c until t ends.
func installStandInCRD(t *testing.T, c client.Client, kind string) {
	t.Helper()
	for _, s := range standIns {
		if s.kind != kind {
			continue
		}
		name := s.plural + "." + s.group
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: s.group,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: s.kind, ListKind: s.kind + "List", Plural: s.plural, Singular: strings.ToLower(s.kind)},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: s.version, Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptrTo(true),
					}},
				}},
			},
		}
		err := c.Create(t.Context(), crd)
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = c.Delete(context.Background(), &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}})
			})
		}
		framework.WaitFor(t, time.Minute, "CRD "+name+" to be established", func(ctx context.Context) (bool, string, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
				return false, "", err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, "", nil
				}
			}
			return false, "not established", nil
		})
		// The client's discovery learns the new kind on its next mapping.
		framework.WaitFor(t, time.Minute, "the API server to serve "+kind, func(ctx context.Context) (bool, string, error) {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: s.group, Version: s.version, Kind: s.kind + "List"})
			err := c.List(ctx, list)
			return err == nil, fmt.Sprint(err), nil
		})
		return
	}
	t.Fatalf("no stand-in CRD for %s", kind)
}

// get reads an applied object back from the API server.
func (tu *tutorials) get(t *testing.T, o *unstructured.Unstructured, ns string) *unstructured.Unstructured {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(o.GroupVersionKind())
	require.NoError(t, tu.f.c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: o.GetName()}, got))
	return got
}

// serviceOnPort80 requires the Function's Service to have port 80, the
// port the APIRule and the Subscription's sink name.
func (tu *tutorials) serviceOnPort80(t *testing.T, ns, name string) {
	t.Helper()
	svc := &corev1.Service{}
	require.NoError(t, tu.f.c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, svc))
	var ports []int32
	for _, sp := range svc.Spec.Ports {
		ports = append(ports, sp.Port)
	}
	assert.Contains(t, ports, int32(80), "Service %s/%s has port 80", ns, name)
}

func (tu *tutorials) expose(t *testing.T, p docs.Page) {
	tu.standInCRD(t, "APIRule")
	ns := tu.namespace(t, "tut-expose")
	tu.sh(t, p, ns, `kubectl label namespace "$NAMESPACE" istio-injection=enabled --overwrite`)
	objs := objects(t, p, ns)
	tu.apply(t, ns, object(t, objs, "Function", "hello-expose"))
	tu.f.in(t).waitRunning(ns, "hello-expose")

	rule := object(t, objs, "APIRule", "hello-expose")
	assert.Equal(t, "gateway.kyma-project.io/v2", rule.GetAPIVersion())
	tu.apply(t, ns, rule)
	stored := tu.get(t, rule, ns)
	service, _, _ := unstructured.NestedString(stored.Object, "spec", "service", "name")
	port, _, _ := unstructured.NestedInt64(stored.Object, "spec", "service", "port")
	hosts, _, _ := unstructured.NestedStringSlice(stored.Object, "spec", "hosts")
	assert.Equal(t, "hello-expose", service, "the APIRule names the Function's Service")
	assert.Equal(t, int64(80), port, "the APIRule names port 80")
	assert.Equal(t, []string{"hello-expose"}, hosts)
	tu.serviceOnPort80(t, ns, service)
	says(t, p, "curl https://hello-expose.<domain>/")
	says(t, p, "Hello from an exposed Function!")
	f := tu.f.in(t)
	f.cluster.WaitForAnswer(t, 2*time.Minute, ns, service, "/", func(body string) bool { return body == "Hello from an exposed Function!" }, f.dumpsFor(ns, service)...)
}

var curlData = regexp.MustCompile(`-d '([^']*)'`)

func (tu *tutorials) events(t *testing.T, p docs.Page) {
	tu.standInCRD(t, "Subscription")
	ns := tu.namespace(t, "tut-events")
	objs := objects(t, p, ns)
	tu.apply(t, ns, object(t, objs, "Function", "order-handler"))
	f := tu.f.in(t)
	f.waitRunning(ns, "order-handler")

	sub := object(t, objs, "Subscription", "order-handler")
	assert.Equal(t, "eventing.kyma-project.io/v1alpha2", sub.GetAPIVersion())
	tu.apply(t, ns, sub)
	stored := tu.get(t, sub, ns)
	sink, _, _ := unstructured.NestedString(stored.Object, "spec", "sink")
	u, err := url.Parse(sink)
	require.NoError(t, err)
	assert.Equal(t, "http", u.Scheme)
	assert.Empty(t, u.Port(), "the sink is the Service's port 80")
	assert.Equal(t, "order-handler."+ns+".svc.cluster.local", u.Hostname(), "the sink is the Function's Service")
	tu.serviceOnPort80(t, ns, "order-handler")

	// The event the page publishes, as the publisher proxy gets it
	// (structured) and as the eventing backend delivers it (binary).
	publish := mustCommand(t, p, "curl -X POST http://localhost:3000/publish")
	m := curlData.FindStringSubmatch(publish)
	require.NotNil(t, m, "the page's event: %s", publish)
	var ce map[string]any
	require.NoError(t, json.Unmarshal([]byte(m[1]), &ce))
	data, err := json.Marshal(ce["data"])
	require.NoError(t, err)
	binary := http.Header{"Content-Type": {fmt.Sprint(ce["datacontenttype"])}}
	for _, k := range []string{"specversion", "type", "source", "id"} {
		binary.Set("Ce-"+k, fmt.Sprint(ce[k]))
	}
	for _, delivery := range []struct {
		name   string
		header http.Header
		body   []byte
	}{
		{"structured", http.Header{"Content-Type": {"application/cloudevents+json"}}, []byte(m[1])},
		{"binary", binary, data},
	} {
		framework.WaitFor(t, time.Minute, "the handler to take the "+delivery.name+" event", func(ctx context.Context) (bool, string, error) {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			r, err := f.cluster.CallService(rctx, ns, "order-handler", http.MethodPost, "/", delivery.header, delivery.body)
			if err != nil {
				return false, err.Error(), nil
			}
			return r.Status == http.StatusOK && r.Body == "OK", fmt.Sprintf("HTTP %d: %s", r.Status, r.Body), nil
		}, f.dumpsFor(ns, "order-handler")...)
	}
	const line = "Received order.created.v1 for order 3211213"
	says(t, p, line)
	framework.WaitFor(t, time.Minute, "the Function's log to show the event", func(context.Context) (bool, string, error) {
		out, err := tu.run(t, ns, mustCommand(t, p, `kubectl logs -n "$NAMESPACE" -l serverless.kyma-project.io/function-name=order-handler`))
		if err != nil {
			return false, out, nil
		}
		return strings.Count(out, line) >= 2, out, nil
	}, f.dumpsFor(ns, "order-handler")...)
}

// modesPage is the tutorial on switching Function modes. It has no
// switches of its own: testSwitchFunctionMode follows it on its switches
// (modesTutorial), so that the module changes mode as few times as the two
// need together.
const modesPage = "01-60-switch-function-mode.md"

// modesTutorial follows modesPage on switches testSwitchFunctionMode makes
// with the page's commands: the page's Function created in build mode
// answers in build, buildless and build mode again, and one created in
// buildless mode (as step 2 says, steps 3 to 5, 8, 7 and 6) in buildless,
// build and buildless mode again.
type modesTutorial struct {
	tu *tutorials
	p  docs.Page
}

func (f *fnEnv) modesTutorial() *modesTutorial {
	f.t.Helper()
	p, err := docs.Read(docs.Tutorials + "/" + modesPage)
	require.NoError(f.t, err)
	return &modesTutorial{tu: &tutorials{f: f}, p: p}
}

// create does steps 2 and 3 in a new namespace, which it returns, with the
// module in mode; the Function is not waited for.
func (m *modesTutorial) create(t *testing.T, mode string) string {
	t.Helper()
	ns := m.tu.f.cluster.Namespace(t, "tut-modes-"+mode)
	if mode == v1alpha1.FunctionModeBuildless {
		says(t, m.p, "If it prints `buildless`")
	}
	assert.Equal(t, mode, m.tu.sh(t, m.p, ns, `kubectl get serverless default -n kyma-system -o jsonpath='{.status.functionMode}'`))
	m.tu.apply(t, ns, objects(t, m.p, ns)...)
	return ns
}

// switchTo runs the page's commands that switch the module to mode: step 6
// to buildless mode, step 8 to build mode.
func (m *modesTutorial) switchTo(t *testing.T, mode string) {
	t.Helper()
	m.tu.sh(t, m.p, "", `kubectl patch serverless default -n kyma-system --type merge -p '{"spec":{"functionMode":"`+mode+`"}}'`)
	m.tu.sh(t, m.p, "", `kubectl wait serverless default -n kyma-system --for=jsonpath='{.status.functionMode}'=`+mode+` --timeout=5m`)
	if mode == v1alpha1.FunctionModeBuildless {
		m.tu.sh(t, m.p, "", `kubectl wait serverless default -n kyma-system --for=jsonpath='{.status.state}'=Ready --timeout=5m`)
	}
}

// answersIn waits until the page's Function in ns runs in mode (steps 4
// and 6) and answers what the page says (steps 5 and 7).
func (m *modesTutorial) answersIn(t *testing.T, ns, mode string) {
	t.Helper()
	m.tu.runsIn(t, ns, mode)
	says(t, m.p, "`curl http://localhost:8080/`")
	m.tu.answers(t, m.p, ns, "hello-modes", "/", "Hello in any mode!")
}

// runsIn waits until the tutorial's Function runs in mode: built and
// Running, or Running on its runtime image with nothing built.
func (tu *tutorials) runsIn(t *testing.T, ns, mode string) {
	f := tu.f.in(t)
	if mode == v1alpha1.FunctionModeBuild {
		f.waitFunction(ns, "hello-modes", "to be built and Running", 5*time.Minute, isRunning)
		return
	}
	f.waitFunction(ns, "hello-modes", "to run buildless", 4*time.Minute, isRunningBuildless)
	f.waitFunction(ns, "hello-modes", "to run its runtime image, not a built one", time.Minute, func(fn *v1alpha2.Function) bool {
		c := f.deployment(ns, "hello-modes").Spec.Template.Spec.Containers
		return isRunningBuildless(fn) && fn.Status.BuiltImage == "" && len(c) > 0 && c[0].Image == fn.Status.RuntimeImage
	})
}

func (tu *tutorials) externalRegistry(t *testing.T, p docs.Page) {
	f := tu.f.in(t)
	ctx := t.Context()
	reg, err := f.cluster.StartRegistry(ctx, framework.RegistrySpec{Name: "registry-" + strings.ReplaceAll(t.Name(), "/", "-"), Dir: t.TempDir(),
		Username: "tutorial", Password: "registry-password-of-the-tutorial"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, reg.Stop(), "stopping the registry") })

	ns := tu.namespace(t, "tut-registry")
	objs := objects(t, p, ns)
	secret := object(t, objs, "Secret", "my-registry")
	require.Equal(t, "kyma-system", secret.GetNamespace(), "the registry Secret is in the Serverless CR's namespace")
	for key, value := range map[string]string{"username": reg.Username, "password": reg.Password, "serverAddress": reg.Address, "registryAddress": reg.Address + "/functions"} {
		require.NoError(t, unstructured.SetNestedField(secret.Object, value, "stringData", key))
	}
	tu.apply(t, ns, secret)
	t.Cleanup(func() {
		_, _ = tu.run(t, ns, `kubectl patch serverless default -n kyma-system --type merge -p '{"spec":{"dockerRegistry":{"enableInternal":true,"secretName":null}}}'`)
		_ = f.c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "my-registry"}})
	})

	tu.sh(t, p, ns, `kubectl patch serverless default -n kyma-system --type merge -p '{"spec":{"dockerRegistry":{"enableInternal":false,"secretName":"my-registry"}}}'`)
	framework.WaitFor(t, 3*time.Minute, "the Serverless CR to show the external registry", func(context.Context) (bool, string, error) {
		out, err := tu.run(t, ns, mustCommand(t, p, `kubectl get serverless default -n kyma-system -o jsonpath='{.status.dockerRegistry}'`))
		return err == nil && out == reg.Address, out, nil
	}, f.dumps("default")...)
	f.waitState("default", v1alpha1.StateReady)

	tu.apply(t, ns, object(t, objs, "Function", "hello-registry"))
	f.waitRunning(ns, "hello-registry")
	image := tu.sh(t, p, ns, `kubectl get deployments -n "$NAMESPACE" -l serverless.kyma-project.io/function-name=hello-registry -o jsonpath=`)
	assert.True(t, strings.HasPrefix(image, reg.Address+"/functions/"+ns+"-hello-registry:"), "the Function runs its image from the external registry: %s", image)
	tu.answers(t, p, ns, "hello-registry", "/", "Hello from my registry!")

	// Back to the internal registry, as the page shows.
	tu.sh(t, p, ns, `kubectl patch serverless default -n kyma-system --type merge -p '{"spec":{"dockerRegistry":{"enableInternal":true,"secretName":null}}}'`)
	f.waitFor("default", "the internal registry again", 3*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.DockerRegistry == "internal" && cr.Status.ObservedGeneration == cr.Generation
	})
}

// kymaCLI follows the Kyma CLI tutorial in a directory of its own: its
// `kyma function` commands run as the Kyma CLI runs them, from the
// extension in the cluster (kymacli_test.go), its kubectl commands with
// bash. Every command that writes a Function's resource runs: init,
// create nodejs and python, get one and all, eject, delete; the Functions
// and the ejected application answer what the page says.
func (tu *tutorials) kymaCLI(t *testing.T, p docs.Page) {
	ns := tu.namespace(t, "tut-cli")
	dir := t.TempDir()
	f := tu.f.in(t)
	cli := newKymaCLI(t, f, dir, map[string]string{"NAMESPACE": ns})
	command := func(prefix string) string {
		t.Helper()
		c, err := p.Command(prefix)
		require.NoError(t, err)
		return c
	}
	shell := func(prefix string) string {
		t.Helper()
		c := command(prefix)
		out, err := tu.runIn(t, ns, dir, c)
		require.NoError(t, err, "%s: %s\n%s", p.Path, c, out)
		return out
	}

	// init writes the two files; the page then shows the handler to write.
	res := cli.run(t, command("kyma function init nodejs"))
	assert.ElementsMatch(t, []string{"hello-cli/handler.js", "hello-cli/package.json"}, res.files)
	deps, err := os.ReadFile(filepath.Join(dir, "hello-cli", "package.json"))
	require.NoError(t, err)
	require.True(t, json.Valid(deps), "init writes a JSON package.json: %s", deps)
	handler, ok := p.Files()["hello-cli/handler.js"]
	require.True(t, ok, "%s shows hello-cli/handler.js", p.Path)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hello-cli", "handler.js"), []byte(handler), 0o644))

	tu.apply(t, ns, objects(t, p, ns)...)
	res = cli.run(t, command("kyma function create nodejs hello-cli"))
	require.Len(t, res.objects, 1)
	running := f.waitRunning(ns, "hello-cli")
	assert.Equal(t, handler, running.Spec.Source.Inline.Source, "the handler file as the page shows it")
	assert.Equal(t, "hello-cli-greeting", running.Spec.SecretMounts[0].SecretName)
	got := cli.run(t, command("kyma function get hello-cli"))
	require.Len(t, got.objects, 1)
	assert.Equal(t, "hello-cli", got.objects[0].GetName())
	const greeting = "Hello, Kyma! (hello-cli)"
	tu.answers(t, p, ns, "hello-cli", "/", greeting)

	cli.run(t, command("kyma function create python hello-cli-python"))
	f.waitRunning(ns, "hello-cli-python")
	var names []string
	for _, o := range cli.run(t, command(`kyma function get -n`)).objects {
		names = append(names, o.GetName())
	}
	assert.ElementsMatch(t, []string{"hello-cli", "hello-cli-python"}, names, "get lists the namespace's Functions")
	tu.answers(t, p, ns, "hello-cli-python", "/", "hello from Serverless")

	ejected := cli.run(t, command("kyma function eject hello-cli"))
	assert.Subset(t, ejected.files, []string{"hello-cli-app/handler.js", "hello-cli-app/package.json", "hello-cli-app/README.md",
		"hello-cli-app/k8s/deployment.yaml", "hello-cli-app/k8s/service.yaml"}, dumpFiles(dir)())
	ejectedHandler, err := os.ReadFile(filepath.Join(dir, "hello-cli-app", "handler.js"))
	require.NoError(t, err)
	assert.Equal(t, handler, string(ejectedHandler))
	shell("kubectl apply -f hello-cli-app/k8s/")
	portForward(t, p, "hello-cli-ejected")
	f.cluster.WaitForAnswer(t, 3*time.Minute, ns, "hello-cli-ejected", "/", func(body string) bool { return body == greeting },
		framework.DumpPods(f.c, ns), framework.DumpEvents(f.c, ns))

	cli.run(t, command("kyma function delete hello-cli "))
	cli.run(t, command("kyma function delete hello-cli-python"))
	f.waitFunctionGone(ns, "hello-cli")
	f.waitFunctionGone(ns, "hello-cli-python")
	shell("kubectl delete -f hello-cli-app/k8s/")
	shell("kubectl delete secret")
}

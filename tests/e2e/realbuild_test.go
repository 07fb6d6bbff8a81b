//go:build e2e

package e2e

// Real builds against an external registry: the registry is the chart's
// software (distribution) running as a process on this machine with
// htpasswd, listening on the real node's address, configured as the
// module's external registry. The module's Pods run on the real node: the
// Function controller, its build Pods (our prepare and build steps, the
// dependency step in the local runtime image with npm against the npm
// registry) and the Functions' Pods, which pull what their build pushed.
// The runtime base is the local runtime image in the node's registry.
// Python dependencies are not built here: PyPI is not reachable from these
// machines (the Python layout is covered by operator/pkg/build's tests with
// requirements that need no download).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/ociimage"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// The build Pod's steps (operator/internal/function/resources).
const (
	stepPrepare      = "prepare"
	stepDependencies = "dependencies"
	stepBuild        = "build"
)

// realBuilds is a module whose Function registry is a registry process
// here, its Pods and its Functions' Pods on the real node.
type realBuilds struct {
	*fnEnv
	reg *framework.Registry
}

// startRealBuilds runs the manager here (with managerArgs) and installs the
// module with the registry process as its external registry; spec may
// change the CR's spec before it is created.
func startRealBuilds(t *testing.T, spec func(*v1alpha1.ServerlessSpec), managerArgs ...string) *realBuilds {
	t.Helper()
	e := newEnv(t)
	ctx := t.Context()
	require.NoError(t, e.cluster.InstallManagerPrerequisites(ctx))
	e.mgr = e.runManager("manager-"+t.Name(), nil, managerArgs...)
	e.placeModule(framework.RealNode)

	password := make([]byte, 16)
	_, err := rand.Read(password)
	require.NoError(t, err)
	reg, err := e.cluster.StartRegistry(ctx, framework.RegistrySpec{Name: "registry-" + t.Name(), Dir: t.TempDir(),
		Username: "functions", Password: hex.EncodeToString(password)})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, reg.Stop(), "stopping the registry") })

	const secretName = "local-registry"
	require.NoError(t, e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName},
		StringData: map[string]string{"username": reg.Username, "password": reg.Password, "serverAddress": reg.Address, "registryAddress": reg.Address}}))
	t.Cleanup(func() {
		_ = e.c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName}})
	})
	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{
			DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptrTo(false), SecretName: ptrTo(secretName)},
			// The real node has 2 CPUs: the smallest Function preset
			// leaves room for builds beside the Functions' Pods.
			DefaultRuntimePodPreset: "XS",
		}}
	if spec != nil {
		spec(&cr.Spec)
	}
	require.NoError(t, e.c.Create(ctx, cr))
	ready := e.waitState("default", v1alpha1.StateReady)
	require.Equal(t, reg.Address, ready.Status.DockerRegistry)
	return &realBuilds{fnEnv: newFnEnv(t, e), reg: reg}
}

// image pulls ref from the registry and lists its files.
func (b *realBuilds) image(ref string) (v1.Image, map[string]ociimage.Entry) {
	b.t.Helper()
	r, err := b.reg.Reference(ref)
	require.NoError(b.t, err)
	img, err := remote.Image(r, b.reg.Auth())
	require.NoError(b.t, err, "pulling %s", ref)
	files, err := ociimage.Files(img)
	require.NoError(b.t, err)
	return img, files
}

// buildPod is the newest build Pod of a Function (the one its Job ran).
func (f *fnEnv) buildPod(ns, fn string) *corev1.Pod {
	f.t.Helper()
	var pods corev1.PodList
	require.NoError(f.t, f.c.List(f.t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha2.LabelFunctionName: fn}))
	var newest *corev1.Pod
	for i := range pods.Items {
		if _, build := pods.Items[i].Labels[batchv1.JobNameLabel]; !build {
			continue
		}
		if newest == nil || newest.CreationTimestamp.Before(&pods.Items[i].CreationTimestamp) {
			newest = &pods.Items[i]
		}
	}
	require.NotNil(f.t, newest, "a build Pod of %s/%s", ns, fn)
	return newest
}

// stepLog is the log of one step (container) of a build Pod.
func (f *fnEnv) stepLog(pod *corev1.Pod, step string) string {
	f.t.Helper()
	log, err := f.cluster.PodLog(f.t.Context(), pod.Namespace, pod.Name, step)
	require.NoError(f.t, err)
	return log
}

// stepTimes says how long each step of a finished build Pod ran, from its
// container states (whole seconds: what kubelet records), and how long the
// Pod took from its creation.
func stepTimes(pod *corev1.Pod) string {
	var parts []string
	var last time.Time
	for _, s := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if term := s.State.Terminated; term != nil {
			parts = append(parts, fmt.Sprintf("%s %.0fs", s.Name, term.FinishedAt.Sub(term.StartedAt.Time).Seconds()))
			if term.FinishedAt.After(last) {
				last = term.FinishedAt.Time
			}
		}
	}
	if !last.IsZero() {
		parts = append(parts, fmt.Sprintf("Pod created to done %.0fs", last.Sub(pod.CreationTimestamp.Time).Seconds()))
	}
	return strings.Join(parts, ", ")
}

// isNumberHandler answers with what the is-number dependency says.
func isNumberHandler(greeting string) string {
	return fmt.Sprintf(`const isNumber = require("is-number");
module.exports = { main: function (event, context) { return %q + ": 42 " + isNumber(42) + ", x " + isNumber("x"); } };
`, greeting)
}

// realFunction is a Node.js Function with the given handler and package.json.
func realFunction(ns, fnName, source, deps string) *v1alpha2.Function {
	fn := inline(ns, fnName, v1alpha2.RuntimeNodejs22, "")
	fn.Spec.Source.Inline.Source = source
	fn.Spec.Source.Inline.Dependencies = deps
	return fn
}

// runningDigest waits for the Function to run a pinned image other than
// not and returns it.
func (f *fnEnv) runningDigest(ns, fnName string, not string) string {
	f.t.Helper()
	fn := f.waitFunction(ns, fnName, "to run a new image by digest", 3*time.Minute, func(fn *v1alpha2.Function) bool {
		return isRunning(fn) && strings.Contains(fn.Status.BuiltImage, "@sha256:") && fn.Status.BuiltImage != not
	})
	image := f.deployment(ns, fnName).Spec.Template.Spec.Containers[0].Image
	assert.Equal(f.t, fn.Status.BuiltImage, image, "the Deployment runs the digest the build reported")
	return image
}

func TestRealBuildsWithNpmDependencies(t *testing.T) {
	b := startRealBuilds(t, nil)
	ctx := t.Context()
	fnNS := b.cluster.Namespace(t, "realbuild")
	// npm runs the root package's postinstall in the dependency step: it
	// reports, from inside that container, what the Pod's restrictions
	// leave it (capabilities, no_new_privs, user, a write to the root).
	deps := `{"name": "hello", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"},
  "scripts": {"postinstall": "grep -E 'CapEff|NoNewPrivs' /proc/self/status; echo uid=$(id -u); touch /x || true"}}`

	// Source → dependency install → image pushed → Deployment on that
	// digest → Running, answering with the dependency's result. The
	// Function whose dependency npm cannot install (checked last) builds
	// meanwhile: it shares nothing with the others.
	require.NoError(t, b.fcs.Create(ctx, realFunction(fnNS, "first", isNumberHandler("hello"), deps)))
	require.NoError(t, b.fcs.Create(ctx, realFunction(fnNS, "broken", isNumberHandler("x"),
		`{"name": "broken", "version": "1.0.0", "dependencies": {"no-such-package-kyma-serverless-e2e": "1.0.0"}}`)))
	first := b.runningDigest(fnNS, "first", "")
	pod := b.buildPod(fnNS, "first")
	install := b.stepLog(pod, stepDependencies)
	t.Logf("first build: %s\n--- dependencies step:\n%s", stepTimes(pod), install)
	assert.Contains(t, install, "added 1 package", "npm installed the dependency")
	assert.Contains(t, b.stepLog(pod, stepPrepare), "kept layer: false")
	t.Run("the dependency step is restricted, seen from inside", func(t *testing.T) {
		assert.Regexp(t, `(?m)^CapEff:\s+0000000000000000$`, install, "no capabilities")
		assert.Regexp(t, `(?m)^NoNewPrivs:\s+1$`, install, "no privilege escalation")
		assert.Regexp(t, `(?m)^uid=1000$`, install, "user 1000")
		assert.Regexp(t, `/x: Read-only file system`, install, "the root filesystem is read-only")
	})
	_, files := b.image(first)
	for _, path := range []string{"usr/src/app/function/handler.js", "usr/src/app/function/package.json",
		"usr/src/app/function/node_modules/is-number/package.json", "usr/src/app/server.mjs",
		"usr/src/app/node_modules/express/package.json"} {
		assert.Contains(t, files, path)
	}
	b.cluster.WaitForAnswer(t, time.Minute, fnNS, "first", "/", func(body string) bool {
		return body == "hello: 42 true, x false"
	}, b.dumpsFor(fnNS, "first")...)

	// A second Function with the same dependencies installs nothing, nor
	// does a source change of the first; both build at once.
	require.NoError(t, b.fcs.Create(ctx, realFunction(fnNS, "second", isNumberHandler("hi"), deps)))
	b.editFunction(fnNS, "first", func(fn *v1alpha2.Function) {
		fn.Spec.Source.Inline.Source = isNumberHandler("hello again")
	})
	second := b.runningDigest(fnNS, "second", "")
	assert.NotEqual(t, first, second)
	pod = b.buildPod(fnNS, "second")
	t.Logf("same dependencies: %s", stepTimes(pod))
	assertKept(t, b.fnEnv, pod)
	b.cluster.WaitForAnswer(t, time.Minute, fnNS, "second", "/", func(body string) bool {
		return body == "hi: 42 true, x false"
	}, b.dumpsFor(fnNS, "second")...)

	// The source change rebuilt without reinstalling; the new image answers.
	changed := b.runningDigest(fnNS, "first", first)
	pod = b.buildPod(fnNS, "first")
	t.Logf("source change: %s", stepTimes(pod))
	assertKept(t, b.fnEnv, pod)
	_, files = b.image(changed)
	assert.Contains(t, files, "usr/src/app/function/node_modules/is-number/package.json", "the kept dependency layer is in the new image")
	b.cluster.WaitForAnswer(t, time.Minute, fnNS, "first", "/", func(body string) bool {
		return body == "hello again: 42 true, x false"
	}, b.dumpsFor(fnNS, "first")...)

	// A dependency npm cannot install: BuildReady False with npm's words;
	// nothing runs for it.
	fn := b.waitFunction(fnNS, "broken", "to report the failed install", 3*time.Minute, func(fn *v1alpha2.Function) bool {
		c := fn.Status.Condition(v1alpha2.ConditionBuildReady)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == v1alpha2.ReasonJobFailed
	})
	msg := fn.Status.Condition(v1alpha2.ConditionBuildReady).Message
	assert.Contains(t, msg, "step dependencies:")
	assert.Contains(t, msg, "404", "npm's error is in the message")
	assert.NotContains(t, msg, b.reg.Password)
	_, deployments, _, _, err := b.children(ctx, fnNS, "broken")
	require.NoError(t, err)
	assert.Empty(t, deployments, "no Deployment for a Function that never built")
	t.Logf("failed install: %s", msg)
}

// assertKept checks that a build found its dependency layer kept: prepare
// says so, and the dependency step installed nothing (npm did not run: no
// postinstall output, no "added").
func assertKept(t *testing.T, f *fnEnv, pod *corev1.Pod) {
	t.Helper()
	assert.Contains(t, f.stepLog(pod, stepPrepare), "kept layer: true")
	install := f.stepLog(pod, stepDependencies)
	assert.Equal(t, "dependencies kept: nothing to install", strings.TrimSpace(install), "the dependency step's whole log")
	assert.NotRegexp(t, regexp.MustCompile(`CapEff|added \d+ package`), install)
}

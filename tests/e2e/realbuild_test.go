//go:build e2e

package e2e

// Real builds: the registry is the chart's software (distribution) running
// here with htpasswd, configured as the module's external registry; build
// Pods of Functions labelled buildrun.Label=process run their containers as
// processes (tests/framework/buildrun): our prepare and build steps from
// bin/, the dependency step with this machine's npm against the npm
// registry. Python dependencies are not built here: PyPI is not reachable
// from these machines (the Python layout is covered by operator/pkg/build's
// tests with requirements that need no download).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	"github.com/kyma-project/serverless-manager/tests/framework/buildrun"
)

// realBuilds is a module whose Function registry is a registry process
// here, and a runner for the build Pods handed to it.
type realBuilds struct {
	*fnEnv
	reg    *framework.Registry
	runner *buildrun.Runner
}

func startRealBuilds(t *testing.T, controllerEnv ...string) *realBuilds {
	t.Helper()
	e := startManager(t)
	ctx := t.Context()

	password := make([]byte, 16)
	_, err := rand.Read(password)
	require.NoError(t, err)
	reg, err := framework.StartRegistry(ctx, "registry-"+t.Name(), filepath.Join(e.cluster.Root(), "bin", "assets"), t.TempDir(), "functions", hex.EncodeToString(password))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, reg.Stop(), "stopping the registry") })

	const secretName = "local-registry"
	require.NoError(t, e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName},
		StringData: map[string]string{"username": reg.Username, "password": reg.Password, "serverAddress": reg.Address, "registryAddress": reg.Address}}))
	t.Cleanup(func() {
		_ = e.c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName}})
	})
	require.NoError(t, e.c.Create(ctx, &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptrTo(false), SecretName: ptrTo(secretName)}}}))
	cr := e.waitState("default", v1alpha1.StateReady)
	require.Equal(t, reg.Address, cr.Status.DockerRegistry)

	f := newFnEnv(t, e) // TODO(real node): controllerEnv through the CR
	r := &buildrun.Runner{Client: e.c, BinDir: filepath.Join(e.cluster.Root(), "bin"), Dir: t.TempDir(), PATH: os.Getenv("PATH")}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.Run(runCtx, func(err error) { t.Errorf("running a build Pod: %v", err) })
	}()
	// Registered last, so it runs first: no build runs while the module goes.
	t.Cleanup(func() { stop(); wg.Wait() })
	return &realBuilds{fnEnv: f, reg: reg, runner: r}
}

func (b *realBuilds) pushBase(repo string) string {
	b.t.Helper()
	ref, err := b.reg.PushStandIn(repo)
	require.NoError(b.t, err)
	return ref
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

// buildOf is the runner's result for the newest build Pod of a Function.
func (b *realBuilds) buildOf(ns, fn string) buildrun.Result {
	b.t.Helper()
	var pods corev1.PodList
	require.NoError(b.t, b.c.List(b.t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha2.LabelFunctionName: fn}))
	var newest *corev1.Pod
	for i := range pods.Items {
		if _, build := pods.Items[i].Labels[batchv1.JobNameLabel]; !build {
			continue
		}
		if newest == nil || newest.CreationTimestamp.Before(&pods.Items[i].CreationTimestamp) {
			newest = &pods.Items[i]
		}
	}
	require.NotNil(b.t, newest, "a build Pod of %s/%s", ns, fn)
	res, ok := b.runner.Results()[newest.Name]
	require.True(b.t, ok, "the runner ran build Pod %s", newest.Name)
	return res
}

func realFunction(ns, fnName, base, greeting, deps string) *v1alpha2.Function {
	fn := inline(ns, fnName, v1alpha2.RuntimeNodejs22, greeting)
	fn.Labels = map[string]string{buildrun.Label: buildrun.Value}
	fn.Spec.RuntimeImageOverride = base
	fn.Spec.Source.Inline.Dependencies = deps
	return fn
}

// runningDigest waits for the Function to run a pinned image and returns it.
func (b *realBuilds) runningDigest(ns, fnName string, not string) string {
	b.t.Helper()
	fn := b.waitFunction(ns, fnName, "to run a new image by digest", 3*time.Minute, func(fn *v1alpha2.Function) bool {
		return isRunning(fn) && strings.Contains(fn.Status.BuiltImage, "@sha256:") && fn.Status.BuiltImage != not
	})
	image := b.deployment(ns, fnName).Spec.Template.Spec.Containers[0].Image
	assert.Equal(b.t, fn.Status.BuiltImage, image, "the Deployment runs the digest the build reported")
	return image
}

func TestRealBuildsWithNpmDependencies(t *testing.T) {
	b := startRealBuilds(t)
	ctx := t.Context()
	base := b.pushBase("function-runtime-nodejs22")
	fnNS := b.cluster.Namespace(t, "realbuild")
	deps := `{"name": "hello", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}`

	// Source → dependency install → image pushed → Deployment on that digest → Running.
	require.NoError(t, b.fcs.Create(ctx, realFunction(fnNS, "first", base, "hello", deps)))
	first := b.runningDigest(fnNS, "first", "")
	res := b.buildOf(fnNS, "first")
	install, ok := res.Step("dependencies")
	require.True(t, ok)
	assert.Contains(t, install.Output, "added 1 package", "npm installed the dependency")
	_, files := b.image(first)
	for _, path := range []string{"usr/src/app/function/handler.js", "usr/src/app/function/package.json",
		"usr/src/app/function/node_modules/is-number/package.json", "usr/local/share/runtime/runtime"} {
		assert.Contains(t, files, path)
	}
	t.Logf("first build: %s", stepTimes(res))

	// A second Function with the same dependencies installs nothing.
	require.NoError(t, b.fcs.Create(ctx, realFunction(fnNS, "second", base, "hi", deps)))
	second := b.runningDigest(fnNS, "second", "")
	res = b.buildOf(fnNS, "second")
	install, _ = res.Step("dependencies")
	assert.Contains(t, install.Output, "dependencies kept: nothing to install")
	assert.NotEqual(t, first, second)
	t.Logf("same dependencies: %s", stepTimes(res))

	// A source change rebuilds without reinstalling.
	b.editFunction(fnNS, "first", func(fn *v1alpha2.Function) {
		fn.Spec.Source.Inline.Source = strings.Replace(fn.Spec.Source.Inline.Source, "hello", "hello again", 1)
	})
	changed := b.runningDigest(fnNS, "first", first)
	res = b.buildOf(fnNS, "first")
	install, _ = res.Step("dependencies")
	assert.Contains(t, install.Output, "dependencies kept: nothing to install")
	t.Logf("source change: %s", stepTimes(res))
	_, files = b.image(changed)
	assert.Contains(t, files, "usr/src/app/function/node_modules/is-number/package.json", "the kept dependency layer is in the new image")

	// A dependency npm cannot install: BuildReady False with npm's words;
	// nothing runs for it.
	require.NoError(t, b.fcs.Create(ctx, realFunction(fnNS, "broken", base, "x",
		`{"name": "broken", "version": "1.0.0", "dependencies": {"no-such-package-kyma-serverless-e2e": "1.0.0"}}`)))
	fn := b.waitFunction(fnNS, "broken", "to report the failed install", 3*time.Minute, func(fn *v1alpha2.Function) bool {
		c := condition(fn, v1alpha2.ConditionBuildReady)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == v1alpha2.ReasonJobFailed
	})
	msg := condition(fn, v1alpha2.ConditionBuildReady).Message
	assert.Contains(t, msg, "step dependencies:")
	assert.Contains(t, msg, "404", "npm's error is in the message")
	assert.NotContains(t, msg, b.reg.Password)
	t.Logf("failed install: %s", msg)
}

func stepTimes(r buildrun.Result) string {
	parts := make([]string, 0, len(r.Steps))
	for _, s := range r.Steps {
		parts = append(parts, fmt.Sprintf("%s %.1fs", s.Name, s.Duration.Seconds()))
	}
	return strings.Join(parts, ", ")
}

//go:build e2e

package e2e

// The registry clean-up beyond the module's own internal registry: an
// external registry (the user's: only with the opt-in, only the module's
// repositories) and the internal registry taken over from 1.8.4. The
// Function controller runs as the chart's Pod on the real node; its
// clean-up rounds come often because the manager renders a copy of the
// chart whose controller Deployment sets the rounds' delay and interval
// (cleanupChart; the chart itself leaves them at their defaults, 10 s and
// an hour).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// cleanupChart writes a copy of the chart whose Function controller runs
// clean-up rounds 1 s after a Deployment's image changed or it went, and
// every 3 s regardless, and returns the manager's flag that renders it.
func cleanupChart(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join(framework.ClusterFor(t).Root(), "charts", "serverless"))))
	path := filepath.Join(dir, "templates", "controller-deployment.yaml")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	const anchor = "            - name: APP_REGISTRY_CLEANUP_EXTERNAL\n"
	require.Equal(t, 1, strings.Count(string(data), anchor), "the controller's env in %s", path)
	timing := "            - name: APP_REGISTRY_CLEANUP_DELAY\n              value: \"1s\"\n" +
		"            - name: APP_REGISTRY_CLEANUP_INTERVAL\n              value: \"3s\"\n"
	data = []byte(strings.Replace(string(data), "  strategy:\n    type: Recreate\n", "", 1)) // DIAGNOSTIC ONLY
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(data), anchor, timing+anchor, 1)), 0o644))
	return "--chart-path=" + dir
}

// fnRepos keeps of a registry's contents the repositories under prefix.
func fnRepos(stored map[string][]string, prefix string) map[string][]string {
	out := map[string][]string{}
	for repo, digests := range stored {
		if strings.HasPrefix(repo, prefix) {
			out[repo] = digests
		}
	}
	return out
}

func sortedDigests(images ...string) []string {
	out := make([]string, 0, len(images))
	for _, img := range images {
		out = append(out, resourcesDigest(img))
	}
	slices.Sort(out)
	return out
}

// skippedRounds counts the clean-up rounds the controller's current Pod
// skipped (logged at debug level).
func (f *fnEnv) skippedRounds(ctx context.Context) (int, error) {
	log, err := f.controllerLog(ctx)
	return strings.Count(log, `"registry clean-up skipped"`), err
}

// An external registry (distribution as a process) is the user's: without
// dockerRegistry.deleteUnusedExternalImages nothing is deleted from it,
// however many rounds run; with it, the unused images of the Functions'
// repositories go by the internal registry's rules, while the user's own
// repositories stay — one named like a Function's among them.
func TestExternalRegistryCleanupIsOptIn(t *testing.T) {
	// Debug: the controller logs the rounds it skips.
	b := startRealBuilds(t, func(s *v1alpha1.ServerlessSpec) { s.LogLevel = "debug" }, cleanupChart(t))
	ctx := t.Context()
	fnNS := b.cluster.Namespace(t, "extclean")
	userRepos := []string{"team/app", fnNS + "-stranger"}
	for _, repo := range userRepos {
		img, err := random.Image(512, 1)
		require.NoError(t, err)
		require.NoError(t, remote.Write(b.reg.Context(repo).Tag("v1"), img, b.reg.Auth()))
	}
	// 1.8.4's kaniko left a cache beside a Function's repository.
	cacheImg, err := random.Image(512, 1)
	require.NoError(t, err)
	require.NoError(t, remote.Write(b.reg.Context(fnNS+"-kept/cache").Tag("c0ffee"), cacheImg, b.reg.Auth()))
	contents := func() map[string][]string {
		stored, err := registryContents(b.reg.Address, b.reg.Auth())
		require.NoError(t, err)
		return stored
	}
	// One package.json for all: one dependency layer, which every image shares.
	create := func(n string) {
		fn := inline(fnNS, n, v1alpha2.RuntimeNodejs22, n)
		fn.Spec.Source.Inline.Dependencies = `{"name": "fn", "version": "1.0.0", "dependencies": {}}`
		require.NoError(t, b.fcs.Create(ctx, fn))
	}
	edit := func(n, text, before string) string {
		b.editFunction(fnNS, n, func(fn *v1alpha2.Function) {
			fn.Spec.Source.Inline.Source = strings.Replace(fn.Spec.Source.Inline.Source, `"`+n, `"`+n+text, 1)
		})
		return b.runningDigest(fnNS, n, before)
	}
	remove := func(n string) {
		require.NoError(t, b.fcs.Delete(ctx, &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: fnNS, Name: n}}))
	}
	// The garbage collector removes a deleted Function's Deployment within
	// moments once its discovery, every 30 s, has found the Function CRD
	// the install created: before, it waits (seen: 14 s for a deletion
	// half a minute after the install).
	gone := func(n string) {
		framework.WaitFor(t, time.Minute, "the Deployment of "+n+" to be gone", func(ctx context.Context) (bool, string, error) {
			_, ds, _, _, err := b.children(ctx, fnNS, n)
			return len(ds) == 0, fmt.Sprintf("%d Deployments", len(ds)), err
		}, b.dumpsFor(fnNS, n)...)
	}

	// Without the opt-in: Functions built, one edited twice, one deleted.
	assert.Equal(t, "false", b.controllerEnv()["APP_REGISTRY_CLEANUP_EXTERNAL"])
	for _, n := range []string{"kept", "edited", "gone-before"} {
		create(n)
	}
	kept := b.runningDigest(fnNS, "kept", "")
	e1 := b.runningDigest(fnNS, "edited", "")
	goneBefore := b.runningDigest(fnNS, "gone-before", "")
	remove("gone-before") // its Deployment goes while edited builds
	e2 := edit("edited", " again", e1)
	e3 := edit("edited", " and again", e2)
	gone("gone-before")
	before := contents()
	require.Len(t, before[fnNS+"-edited"], 3, "three builds of edited: %v", before)
	require.Len(t, before["serverless-dependencies"], 2, "one dependency layer and the runtime base's copy: %v", before)
	// Rounds run every 3 s and after each change: let three more run.
	skipped, err := b.skippedRounds(ctx)
	require.NoError(t, err)
	framework.WaitFor(t, 30*time.Second, "three more clean-up rounds (skipped: no opt-in)", func(ctx context.Context) (bool, string, error) {
		n, err := b.skippedRounds(ctx)
		return n >= skipped+3, fmt.Sprintf("%d skipped rounds, %d before", n, skipped), err
	}, b.dumpController())
	assert.Equal(t, before, contents(), "without the opt-in nothing is deleted from the external registry")
	err = b.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryRepositoriesName}, &corev1.ConfigMap{})
	assert.True(t, apierrors.IsNotFound(err), "no record written without the opt-in: %v", err)

	// The opt-in reaches the controller through the chart: its Deployment
	// rolls, and the new Pod runs with it.
	old := b.controllerPod()
	b.update("default", func(cr *v1alpha1.Serverless) {
		cr.Spec.DockerRegistry.DeleteUnusedExternalImages = ptrTo(true)
	})
	framework.WaitFor(t, 2*time.Minute, "the controller's rolled Pod to run with the opt-in", func(ctx context.Context) (bool, string, error) {
		p, err := b.cluster.ReadyPod(ctx, ns, controllerLabels)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, v := range p.Spec.Containers[0].Env {
			if v.Name == "APP_REGISTRY_CLEANUP_EXTERNAL" {
				return p.UID != old.UID && v.Value == "true", fmt.Sprintf("Pod %s: %s=%s", p.Name, v.Name, v.Value), nil
			}
		}
		return false, "Pod " + p.Name + " without APP_REGISTRY_CLEANUP_EXTERNAL", nil
	}, framework.DumpPods(b.c, ns), framework.DumpEvents(b.c, ns))
	// A Function built and deleted with the opt-in on: its repository was
	// recorded before the push.
	create("gone-after")
	b.runningDigest(fnNS, "gone-after", "")
	remove("gone-after")
	gone("gone-after")

	want := map[string][]string{
		fnNS + "-kept":   sortedDigests(kept),
		fnNS + "-edited": sortedDigests(e2, e3), // the running image and the one before it
		// Deleted before the opt-in: the module never recorded its repository.
		fnNS + "-gone-before": sortedDigests(goneBefore),
		fnNS + "-stranger":    before[fnNS+"-stranger"],
	}
	var last map[string][]string
	framework.WaitFor(t, time.Minute, "the external registry to keep only what Functions use, in the module's repositories only", func(context.Context) (bool, string, error) {
		last = contents()
		got := fnRepos(last, fnNS+"-")
		return reflect.DeepEqual(got, want), fmt.Sprintf("%v, want %v", got, want), nil
	}, b.dumpController())
	for _, repo := range userRepos {
		assert.Equal(t, before[repo], last[repo], "the user's repository %s stays", repo)
	}
	assert.Equal(t, before["serverless-dependencies"], last["serverless-dependencies"], "the shared dependency layer stays")
	record := &corev1.ConfigMap{}
	require.NoError(t, b.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryRepositoriesName}, record))
	assert.Equal(t, map[string]string{fnNS + "-kept": b.reg.Address, fnNS + "-edited": b.reg.Address}, record.Data,
		"the record: the existing Functions' repositories; the emptied one of a departed Function left it")
	t.Logf("external registry after the clean-up: %v", last)
}

// A registry taken over from serverless-operator 1.8.4 holds images as it
// pushed them: <namespace>-<function>:<tag>, kaniko's cache in
// <namespace>-<function>/cache, the images of Functions since deleted and
// of builds since replaced. The module's first rounds keep the image the
// Function 1.8.4 built still runs (its Deployment pulls it by tag through
// the NodePort) and delete the rest.
//
// 1.8.4's installation (fixtures) runs on the simulated nodes (its images
// cannot run here); what its registry stored is written onto the claim's
// volume by the same registry software, as root like 1.8.4's registry. The
// takeover's Pods — the module's registry on that volume (its init
// container gives it to the registry's user) and its controller — run on
// the real node.
func TestTakenOverRegistryIsCleaned(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	inst := e.installUpstream(ctx)

	// A Function 1.8.4's controller built and runs (the module's controller
	// with upstream's configuration plays it; the Function's build and Pods
	// are simulated, as 1.8.4's registry is).
	fnNS := e.cluster.SimulatedNamespace(t, "takeover-reg")
	e.placeModule(framework.RealNode)
	f, stopStandIn := e.standInFunctionController(inst)
	require.NoError(t, f.fcs.Create(ctx, inline(fnNS, "runs", v1alpha2.RuntimePython312, "built by 1.8.4")))
	f.waitRunning(fnNS, "runs")
	running := f.deployment(fnNS, "runs").Spec.Template.Spec.Containers[0].Image
	stopStandIn() // upstream's controller goes with its operator

	secret := &corev1.Secret{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName}, secret))
	pull := string(secret.Data["pullRegAddr"])
	require.True(t, strings.HasPrefix(running, pull+"/"), "1.8.4's Deployment pulls %s through the NodePort %s", running, pull)
	repo, runningTag, _ := strings.Cut(strings.TrimPrefix(running, pull+"/"), ":")

	// What 1.8.4 left in its registry: the running image, the one its
	// previous build pushed, a deleted Function's, kaniko's caches.
	old, err := e.cluster.StartRegistry(ctx, framework.RegistrySpec{Name: "registry-1.8.4-" + t.Name(), Dir: t.TempDir(),
		Storage: e.claimPath(module.RegistryPVCName), Username: "upstream", Password: "upstream"})
	require.NoError(t, err)
	pushed := map[string]string{}
	for _, ref := range []string{repo + ":" + runningTag, repo + ":0ld", repo + "/cache:k1", repo + "/cache:k2",
		fnNS + "-deleted:t", fnNS + "-deleted/cache:k3"} {
		img, err := random.Image(1024, 2)
		require.NoError(t, err)
		tag, err := name.NewTag(old.Address+"/"+ref, name.Insecure)
		require.NoError(t, err)
		require.NoError(t, remote.Write(tag, img, old.Auth()), "writing %s", ref)
		d, err := img.Digest()
		require.NoError(t, err)
		pushed[ref] = d.String()
	}
	stored, err := registryContents(old.Address, old.Auth())
	require.NoError(t, err)
	require.Len(t, fnRepos(stored, fnNS+"-"), 4, "1.8.4's images are on the volume: %v", stored)
	require.NoError(t, old.Stop())

	// The manager takes over: the registry's and the controller's
	// Deployments roll onto the real node.
	e.mgr = e.runManager("manager-"+t.Name(), nil, cleanupChart(t))
	e.waitFor("default", "the takeover to be Ready", 2*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation
	})
	f.controllerPod()
	// The registry as the node pulls from it: through the NodePort on
	// localhost, with the credentials the takeover kept.
	opts := []remote.Option{remote.WithTransport(direct),
		remote.WithAuth(&authn.Basic{Username: string(secret.Data["username"]), Password: string(secret.Data["password"])})}
	want := map[string][]string{repo: {pushed[repo+":"+runningTag]}}
	framework.WaitFor(t, 2*time.Minute, "the taken-over registry to keep only the image the Function runs", func(context.Context) (bool, string, error) {
		stored, err = registryContents(pull, opts...)
		if err != nil {
			return false, err.Error(), nil
		}
		got := fnRepos(stored, fnNS+"-")
		return reflect.DeepEqual(got, want), fmt.Sprintf("%v, want %v", got, want), nil
	}, f.dumpController(), framework.DumpPods(e.c, ns), e.cluster.DumpPodLogs(ns, map[string]string{"app": "docker-registry"}, 20))
	ref, err := name.ParseReference(running, name.Insecure)
	require.NoError(t, err)
	require.NoError(t, pullAll(ref, opts...), "the running image still pulls whole")
	f.waitRunning(fnNS, "runs")
	assert.Equal(t, running, f.deployment(fnNS, "runs").Spec.Template.Spec.Containers[0].Image, "no rebuild, no rollout")
}

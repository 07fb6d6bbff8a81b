//go:build e2e

package e2e

// The registry clean-up beyond the module's own internal registry: an
// external registry (the user's: only with the opt-in, only the module's
// repositories) and the internal registry taken over from 1.8.4.

import (
	"context"
	"fmt"
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
	"github.com/kyma-project/serverless-manager/tests/framework/localnode"
)

// cleanupEnv makes rounds come often: 1 s after a Deployment's image
// changed or it went, and every 3 s regardless.
var cleanupEnv = []string{"APP_REGISTRY_CLEANUP_DELAY=1s", "APP_REGISTRY_CLEANUP_INTERVAL=3s"}

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

// An external registry (distribution as a process) is the user's: without
// dockerRegistry.deleteUnusedExternalImages nothing is deleted from it,
// however many rounds run; with it, the unused images of the Functions'
// repositories go by the internal registry's rules, while the user's own
// repositories stay — one named like a Function's among them.
func TestExternalRegistryCleanupIsOptIn(t *testing.T) {
	b := startRealBuilds(t, cleanupEnv...)
	ctx := t.Context()
	fnNS := b.cluster.Namespace(t, "extclean")
	base := b.pushBase("stand-in/base")
	userRepos := []string{"team/app", fnNS + "-stranger"}
	for _, repo := range userRepos {
		b.pushBase(repo)
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
	deps := `{"name": "fn", "version": "1.0.0", "dependencies": {}}`
	build := func(n string) string {
		require.NoError(t, b.fcs.Create(ctx, realFunction(fnNS, n, base, n, deps)))
		return b.runningDigest(fnNS, n, "")
	}
	edit := func(n, text, before string) string {
		b.editFunction(fnNS, n, func(fn *v1alpha2.Function) {
			fn.Spec.Source.Inline.Source = strings.Replace(fn.Spec.Source.Inline.Source, `"`+n, `"`+n+text, 1)
		})
		return b.runningDigest(fnNS, n, before)
	}
	remove := func(n string) {
		require.NoError(t, b.fcs.Delete(ctx, &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: fnNS, Name: n}}))
		b.waitFunctionGone(fnNS, n)
		framework.WaitFor(t, time.Minute, "the Deployment of "+n+" to be gone", func(ctx context.Context) (bool, string, error) {
			_, ds, _, _, err := b.children(ctx, fnNS, n)
			return len(ds) == 0, fmt.Sprintf("%d Deployments", len(ds)), err
		})
	}

	// Without the opt-in: Functions built, one edited twice, one deleted.
	assert.Equal(t, "false", b.controllerEnv()["APP_REGISTRY_CLEANUP_EXTERNAL"])
	kept := build("kept")
	e1 := build("edited")
	goneBefore := build("gone-before")
	e2 := edit("edited", " again", e1)
	e3 := edit("edited", " and again", e2)
	remove("gone-before")
	before := contents()
	require.Len(t, before[fnNS+"-edited"], 3, "three builds of edited: %v", before)
	// Rounds run every 3 s and after each change: several have run by now.
	time.Sleep(10 * time.Second)
	assert.Equal(t, before, contents(), "without the opt-in nothing is deleted from the external registry")
	err = b.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryRepositoriesName}, &corev1.ConfigMap{})
	assert.True(t, apierrors.IsNotFound(err), "no record written without the opt-in: %v", err)

	// The opt-in reaches the controller through the chart; the controller
	// starts again with it, as its rolled Pod would.
	b.update("default", func(cr *v1alpha1.Serverless) {
		cr.Spec.DockerRegistry.DeleteUnusedExternalImages = ptrTo(true)
	})
	framework.WaitFor(t, time.Minute, "the controller Deployment to carry the opt-in", func(context.Context) (bool, string, error) {
		v := b.controllerEnv()["APP_REGISTRY_CLEANUP_EXTERNAL"]
		return v == "true", "APP_REGISTRY_CLEANUP_EXTERNAL=" + v, nil
	})
	b.controllerPod()
	// A Function built and deleted with the opt-in on: its repository was
	// recorded before the push.
	build("gone-after")
	remove("gone-after")

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
	})
	for _, repo := range append([]string{"stand-in/base"}, userRepos...) {
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
func TestTakenOverRegistryIsCleaned(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	inst := e.installUpstream(ctx)

	// A Function 1.8.4's controller built and runs (the module's controller
	// with upstream's configuration plays it; its build is simulated).
	f, stopStandIn := e.standInFunctionController(inst)
	fnNS := e.cluster.Namespace(t, "takeover-reg")
	require.NoError(t, f.fcs.Create(ctx, inline(fnNS, "runs", v1alpha2.RuntimePython312, "built by 1.8.4")))
	f.waitRunning(fnNS, "runs")
	running := f.deployment(fnNS, "runs").Spec.Template.Spec.Containers[0].Image
	stopStandIn() // upstream's controller goes with its operator

	// The manager takes over; its registry Pod runs here on the claim.
	network, err := localnode.StartNetwork()
	require.NoError(t, err)
	e.mgr = e.runManager("manager-"+t.Name(), network.Env())
	e.waitFor("default", "the takeover to be Ready", 2*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation
	})
	runLocalNode(t, e, network, false)
	secret := &corev1.Secret{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName}, secret))
	pull, push := string(secret.Data["pullRegAddr"]), string(secret.Data["pushRegAddr"])
	require.True(t, strings.HasPrefix(running, pull+"/"), "1.8.4's Deployment pulls %s through the NodePort %s", running, pull)
	opts := []remote.Option{remote.WithTransport(network.Transport()),
		remote.WithAuth(&authn.Basic{Username: string(secret.Data["username"]), Password: string(secret.Data["password"])})}

	// What 1.8.4 left in the registry: the running image, the one its
	// previous build pushed, a deleted Function's, kaniko's caches.
	repo, runningTag, _ := strings.Cut(strings.TrimPrefix(running, pull+"/"), ":")
	pushed := map[string]string{}
	put := func(ref string) {
		img, err := random.Image(1024, 2)
		require.NoError(t, err)
		tag, err := name.NewTag(push+"/"+ref, name.Insecure)
		require.NoError(t, err)
		framework.WaitFor(t, time.Minute, "pushing "+ref+" into the taken-over registry", func(context.Context) (bool, string, error) {
			err := remote.Write(tag, img, opts...)
			return err == nil, fmt.Sprint(err), nil
		})
		d, err := img.Digest()
		require.NoError(t, err)
		pushed[ref] = d.String()
	}
	for _, ref := range []string{repo + ":" + runningTag, repo + ":0ld", repo + "/cache:k1", repo + "/cache:k2",
		fnNS + "-deleted:t", fnNS + "-deleted/cache:k3"} {
		put(ref)
	}
	stored, err := registryContents(push, opts...)
	require.NoError(t, err)
	require.Len(t, fnRepos(stored, fnNS+"-"), 4, "1.8.4's images are in: %v", stored)

	// The module's controller, as the taken-over Deployment runs it.
	f.controllerPod()
	want := map[string][]string{repo: {pushed[repo+":"+runningTag]}}
	framework.WaitFor(t, time.Minute, "the taken-over registry to keep only the image the Function runs", func(context.Context) (bool, string, error) {
		stored, err = registryContents(push, opts...)
		if err != nil {
			return false, err.Error(), nil
		}
		got := fnRepos(stored, fnNS+"-")
		return reflect.DeepEqual(got, want), fmt.Sprintf("%v, want %v", got, want), nil
	}, f.dumpController())
	ref, err := name.ParseReference(push+"/"+repo+":"+runningTag, name.Insecure)
	require.NoError(t, err)
	require.NoError(t, pullAll(ref, opts...), "the running image still pulls whole")
	f.waitRunning(fnNS, "runs")
	assert.Equal(t, running, f.deployment(fnNS, "runs").Spec.Template.Spec.Containers[0].Image, "no rebuild, no rollout")
}

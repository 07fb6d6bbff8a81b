//go:build e2e

package e2e

// The chart's internal registry as the module installs it: its Deployment
// runs here as a process (tests/framework/localnode: distribution with the
// htpasswd its init container writes from the registry Secret, its volume
// the claim's host path), build steps reach it by its Service name, and
// runtime base images are stand-ins in it, as `make run` sets it up.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/ociimage"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
	"github.com/kyma-project/serverless-manager/tests/framework"
	"github.com/kyma-project/serverless-manager/tests/framework/buildrun"
	"github.com/kyma-project/serverless-manager/tests/framework/localnode"
)

// internalRegistry is the module installed with its internal registry,
// the registry and build Pods run here, and the Function controller with
// the node's network.
type internalRegistry struct {
	*realBuilds
	node        *localnode.Node
	network     *localnode.Network
	pushAddress string
	auth        remote.Option
	// agent is the registry-agent sidecar, reached through its Service.
	agent *registryagent.Client
}

func startInternalRegistry(t *testing.T, controllerEnv ...string) *internalRegistry {
	e := newEnv(t)
	ctx := t.Context()
	require.NoError(t, e.cluster.InstallManagerPrerequisites(ctx))
	pushAddress := module.RegistryServiceName + "." + ns + ".svc.cluster.local:5000"
	// The manager measures the registry through its agent's Service name.
	network, err := localnode.StartNetwork()
	require.NoError(t, err)
	e.mgr = e.runManager("manager-"+t.Name(), append(network.Env(),
		"IMAGE_FUNCTION_RUNTIME_NODEJS22="+pushAddress+"/stand-in/function-runtime-nodejs22:e2e"), "--registry-usage-every=2s")
	require.NoError(t, e.c.Create(ctx, &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptrTo(true)}}}))
	e.waitState("default", v1alpha1.StateReady)

	node, runner := runLocalNode(t, e, network, true)

	// The registry answers by its Service name with the chart's credentials
	// once its init step wrote them: the stand-in goes in.
	var pushed []string
	deadline := time.Now().Add(time.Minute)
	for len(pushed) == 0 {
		pushed, err = node.PushStandIns(ctx, ns)
		require.True(t, time.Now().Before(deadline), "the internal registry took no stand-in within a minute; last: %v", err)
		if len(pushed) == 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	require.Equal(t, []string{pushAddress + "/stand-in/function-runtime-nodejs22:e2e"}, pushed)

	secret := &corev1.Secret{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName}, secret))
	f := newFnEnv(t, e) // TODO(real node): controllerEnv through the CR
	return &internalRegistry{realBuilds: &realBuilds{fnEnv: f, runner: runner}, node: node, network: network, pushAddress: pushAddress,
		auth: remote.WithAuth(&authn.Basic{Username: string(secret.Data["username"]), Password: string(secret.Data["password"])}),
		agent: &registryagent.Client{URL: registryagent.URL(ns),
			Username: string(secret.Data["username"]), Password: string(secret.Data["password"]),
			HTTP: &http.Client{Transport: network.Transport()}}}
}

// runLocalNode runs the registry Deployment here and, with builds, the
// build Pods of Functions labelled buildrun.Label; both stop (and the
// network closes) before the module is uninstalled.
func runLocalNode(t *testing.T, e *env, network *localnode.Network, builds bool) (*localnode.Node, *buildrun.Runner) {
	root := e.cluster.Root()
	node := &localnode.Node{Client: e.c, BinDir: filepath.Join(root, "bin"), AssetsDir: filepath.Join(root, "bin", "assets"),
		Dir: t.TempDir(), LogDir: e.cluster.LogDir(), Network: network,
		Report: func(err error) { t.Logf("local node: %v", err) }}
	runner := node.BuildRunner(os.Getenv("PATH"))
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); node.RunDeployment(runCtx, ns, module.RegistryServiceName) }()
	if builds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runner.Run(runCtx, func(err error) { t.Errorf("running a build Pod: %v", err) })
		}()
	}
	// Registered after newEnv's, so it runs first.
	t.Cleanup(func() { stop(); wg.Wait(); assert.NoError(t, network.Close()) })
	return node, runner
}

// pushRef is an image the Deployment pulls (pull address) as the registry
// behind the Service knows it.
func (r *internalRegistry) pushRef(image string) name.Reference {
	r.t.Helper()
	secret := &corev1.Secret{}
	require.NoError(r.t, r.c.Get(r.t.Context(), types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName}, secret))
	pull := string(secret.Data["pullRegAddr"])
	require.True(r.t, strings.HasPrefix(image, pull+"/"), "the Deployment pulls %s from the pull address %s", image, pull)
	ref, err := name.ParseReference(r.pushAddress+strings.TrimPrefix(image, pull), name.Insecure)
	require.NoError(r.t, err)
	return ref
}

// stored lists repository → digests the registry holds by tag.
func (r *internalRegistry) stored() (map[string][]string, error) {
	return registryContents(r.pushAddress, remote.WithTransport(r.network.Transport()), r.auth)
}

// registryContents lists repository → digests the registry at address
// holds by tag.
func registryContents(address string, opts ...remote.Option) (map[string][]string, error) {
	reg, err := name.NewRegistry(address, name.Insecure)
	if err != nil {
		return nil, err
	}
	repos, err := remote.Catalog(context.Background(), reg, opts...)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, repo := range repos {
		tags, err := remote.List(reg.Repo(repo), opts...)
		if err != nil {
			continue // a repository whose images all went answers "unknown"
		}
		for _, tag := range tags {
			desc, err := remote.Head(reg.Repo(repo).Tag(tag), opts...)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(out[repo], desc.Digest.String()) {
				out[repo] = append(out[repo], desc.Digest.String())
			}
		}
		slices.Sort(out[repo])
	}
	return out, nil
}

func TestBuildsWithTheInternalRegistry(t *testing.T) {
	b := startInternalRegistry(t)
	ctx := t.Context()
	fnNS := b.cluster.Namespace(t, "internalreg")
	fn := inline(fnNS, "hello", v1alpha2.RuntimeNodejs22, "hello")
	fn.Labels = map[string]string{buildrun.Label: buildrun.Value}
	fn.Spec.Source.Inline.Dependencies = `{"name": "hello", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}`
	require.NoError(t, b.fcs.Create(ctx, fn))
	image := b.runningDigest(fnNS, "hello", "")
	res := b.buildOf(fnNS, "hello")
	install, _ := res.Step("dependencies")
	assert.Contains(t, install.Output, "added 1 package")
	t.Logf("build: %s; runs %s", stepTimes(res), image)

	// Nodes pull it by the pull address; it is in the registry behind the
	// Service, with the credentials of the registry Secret.
	ref := b.pushRef(image)
	_, err := remote.Get(ref, remote.WithTransport(b.network.Transport()), b.auth)
	require.NoError(t, err, "the built image is in the internal registry")
	_, err = remote.Get(ref, remote.WithTransport(b.network.Transport()))
	require.Error(t, err, "the internal registry refuses anonymous pulls")

	// The registry-agent sidecar runs beside it on the same volume: it sees
	// the stand-in, the Function's image and its kept dependency layer, and
	// its GC, with nothing deleted, keeps every blob.
	usage, err := b.agent.Usage(ctx)
	require.NoError(t, err)
	t.Logf("registry usage: %+v", usage)
	assert.Equal(t, 3, usage.TaggedImages, "stand-in, Function image, dependency layer")
	assert.Positive(t, usage.UsedBytes)
	gc, err := b.agent.GC(ctx)
	require.NoError(t, err)
	t.Logf("registry GC: %+v", gc)
	assert.Zero(t, gc.BlobsDeleted, "every blob belongs to a tagged image")

	// The Serverless CR says how full the registry is.
	cr := b.waitFor("default", "the status to count the registry's 3 images", time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.InternalRegistry != nil && cr.Status.InternalRegistry.Images == 3
	})
	u := cr.Status.InternalRegistry
	t.Logf("status.internalRegistry: %+v", *u)
	assert.Positive(t, u.UsedBytes)
	assert.Positive(t, u.TotalBytes)
	assert.Equal(t, v1alpha1.StateReady, cr.Status.State, "far from full")
	_, err = remote.Get(ref, remote.WithTransport(b.network.Transport()), b.auth)
	require.NoError(t, err, "the built image still pulls after the GC")
}

// The clean-up keeps exactly what is used: 20 Functions with the same
// dependencies built, 8 deleted, 5 changed twice → the current images of
// 12, the previous ones of the 5 changed (not their first), one dependency
// layer and the runtime base.
func TestRegistryKeepsOnlyWhatIsUsed(t *testing.T) {
	b := startInternalRegistry(t, "APP_REGISTRY_CLEANUP_DELAY=2s")
	ctx := t.Context()
	fnNS := b.cluster.Namespace(t, "cleanup")
	deps := `{"name": "fn", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}`
	const total, deleted, changed = 20, 8, 5
	names := make([]string, total)
	for i := range names {
		names[i] = fmt.Sprintf("fn-%02d", i)
		fn := inline(fnNS, names[i], v1alpha2.RuntimeNodejs22, names[i])
		fn.Labels = map[string]string{buildrun.Label: buildrun.Value}
		fn.Spec.Source.Inline.Dependencies = deps
		require.NoError(t, b.fcs.Create(ctx, fn))
	}
	first := map[string]string{}
	for _, n := range names {
		first[n] = b.runningDigest(fnNS, n, "")
	}
	before, err := b.agent.Usage(ctx)
	require.NoError(t, err)

	// Nodes keep pulling the images that run while images are deleted and
	// garbage is collected; the builds the edits start push meanwhile
	// (they wait while a round runs).
	pulls := b.pullLoop(names[deleted+changed:], first) // the Functions that keep their image
	for _, n := range names[:deleted] {
		require.NoError(t, b.fcs.Delete(ctx, &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: fnNS, Name: n}}))
	}
	// Changed twice: the first image goes, the second stays for a rollback.
	edit := func(n, text string) {
		b.editFunction(fnNS, n, func(fn *v1alpha2.Function) {
			fn.Spec.Source.Inline.Source = strings.Replace(fn.Spec.Source.Inline.Source, `"`+n, `"`+n+text, 1)
		})
	}
	second := map[string]string{}
	for _, n := range names[deleted : deleted+changed] {
		edit(n, " again")
	}
	for _, n := range names[deleted : deleted+changed] {
		second[n] = b.runningDigest(fnNS, n, first[n])
		edit(n, " and again")
	}
	want := map[string][]string{}
	for i, n := range names[deleted:] {
		repo, digests := fnNS+"-"+n, []string{resourcesDigest(first[n])}
		if i < changed {
			digests = []string{resourcesDigest(second[n]), resourcesDigest(b.runningDigest(fnNS, n, second[n]))}
		}
		slices.Sort(digests)
		want[repo] = digests
	}

	var last map[string][]string
	framework.WaitFor(t, 2*time.Minute, fmt.Sprintf("the registry to keep the current images of %d Functions and the previous ones of %d", total-deleted, changed),
		func(context.Context) (bool, string, error) {
			stored, err := b.stored()
			if err != nil {
				return false, err.Error(), nil
			}
			last = stored
			fns := map[string][]string{}
			for repo, digests := range stored {
				if strings.HasPrefix(repo, fnNS+"-") {
					fns[repo] = digests
				}
			}
			return reflect.DeepEqual(fns, want), fmt.Sprintf("Function images %v, want %v", fns, want), nil
		})
	assert.Len(t, last["serverless-dependencies"], 1, "one dependency layer, shared")
	assert.Len(t, last["stand-in/function-runtime-nodejs22"], 1, "the runtime base builds use")
	// The images' own layers left the volume (the garbage collection runs
	// right after the deletes, in the same round).
	var after registryagent.Usage
	framework.WaitFor(t, time.Minute, "the registry's volume to shrink", func(ctx context.Context) (bool, string, error) {
		after, err = b.agent.Usage(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return after.Manifests == after.TaggedImages, fmt.Sprintf("%d manifests stored, %d tagged images, %d bytes (%d before)",
			after.Manifests, after.TaggedImages, after.UsedBytes, before.UsedBytes), nil
	})
	t.Logf("registry: %d images, %d bytes before; %d images, %d bytes after the clean-up", before.TaggedImages, before.UsedBytes, after.TaggedImages, after.UsedBytes)
	n, failures := pulls()
	assert.Empty(t, failures, "no pull of a running image failed")
	assert.Positive(t, n)
	t.Logf("%d pulls during the clean-up, none failed", n)
	// Each Function image has three blobs of its own (source layer, config,
	// manifest); the base and the dependency layer are shared.
	assert.Equal(t, before.Blobs+3*changed-3*deleted, after.Blobs, "the changed Functions' new blobs came (two images, one went), the deleted Functions' went")
}

// pullLoop pulls the given Functions' images (manifest, config and every
// layer) over and over until the returned stop is called, which reports
// the number of pulls and the failures.
func (r *internalRegistry) pullLoop(fns []string, images map[string]string) (stop func() (int, []string)) {
	refs := make([]name.Reference, 0, len(fns))
	for _, n := range fns {
		refs = append(refs, r.pushRef(images[n]))
	}
	done := make(chan struct{})
	var mu sync.Mutex
	var failures []string
	count := 0
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			for _, ref := range refs {
				select {
				case <-done:
					return
				default:
				}
				err := pullAll(ref, remote.WithTransport(r.network.Transport()), r.auth)
				mu.Lock()
				count++
				if err != nil {
					failures = append(failures, fmt.Sprintf("%s: %v", ref, err))
				}
				mu.Unlock()
			}
		}
	}()
	return func() (int, []string) {
		close(done)
		wg.Wait()
		return count, failures
	}
}

// pullAll reads an image as a node pulls it: manifest, config, layers.
func pullAll(ref name.Reference, opts ...remote.Option) error {
	img, err := remote.Image(ref, opts...)
	if err != nil {
		return err
	}
	return ociimage.ReadAll(img)
}

func resourcesDigest(image string) string {
	_, digest, _ := strings.Cut(image, "@")
	return digest
}

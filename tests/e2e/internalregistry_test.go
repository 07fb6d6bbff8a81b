//go:build e2e

package e2e

// The chart's internal registry as the module installs it, on the real
// node: its Pod (the init container writes the htpasswd file from the
// registry Secret, distribution serves the claim's volume, the
// registry-agent sidecar measures and collects it), build Pods push to it
// by its Service name and the Functions' Pods pull from it through its
// NodePort on localhost. The runtime base images are the local ones in the
// node's registry, so the internal registry holds only what builds pushed.
// The test reaches the registry and the agent at their Services' cluster
// IPs (kube-proxy on this machine, as on a node), pulls as a node does
// through the NodePort on localhost, and reads the claim's volume where its
// PersistentVolume keeps it (a host path under .cluster/volumes).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/ociimage"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// direct reaches cluster IPs and node ports straight, never through a
// proxy the environment may name.
var direct = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8}

// internalRegistry is the module installed with its internal registry,
// everything on the real node.
type internalRegistry struct {
	*fnEnv
	// service is the registry Service's cluster IP and port: what build
	// Pods push to by its name.
	service string
	// pull is the pull address (localhost:<NodePort>) Deployments name.
	pull string
	auth remote.Option
	// agent is the registry-agent sidecar, reached at its Service's cluster IP.
	agent *registryagent.Client
	// volume is the host path of the registry claim's PersistentVolume.
	volume string
}

// startInternalRegistry installs the module with its internal registry.
// inCluster runs the manager as its Pod (it measures the registry through
// the agent's Service name, which only resolves in the cluster), measuring
// every 2 s; otherwise it runs here.
func startInternalRegistry(t *testing.T, inCluster bool) *internalRegistry {
	t.Helper()
	var e *env
	if inCluster {
		var objs []*unstructured.Unstructured
		e, objs = startManagerInCluster(t)
		e.measureRegistryEvery(objs, "2s")
	} else {
		e = startManager(t)
		e.placeModule(framework.RealNode)
	}
	ctx := t.Context()
	require.NoError(t, e.c.Create(ctx, &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{
			DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptrTo(true)},
			// The real node has 2 CPUs: the smallest requests let many
			// Functions run and builds start beside them (slow asks what
			// local-dev asks, with a higher limit).
			DefaultRuntimePodPreset: "XS",
			DefaultBuildJobPreset:   "slow",
		}}))
	e.waitState("default", v1alpha1.StateReady)
	f := newFnEnv(t, e)

	secret := &corev1.Secret{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName}, secret))
	user, password := string(secret.Data["username"]), string(secret.Data["password"])
	service, err := e.cluster.ServiceAddress(ctx, ns, module.RegistryServiceName, 5000)
	require.NoError(t, err)
	agent, err := e.cluster.ServiceAddress(ctx, ns, module.RegistryAgentServiceName, registryagent.Port)
	require.NoError(t, err)
	r := &internalRegistry{fnEnv: f, service: service, pull: string(secret.Data["pullRegAddr"]),
		auth:   remote.WithAuth(&authn.Basic{Username: user, Password: password}),
		agent:  &registryagent.Client{URL: "http://" + agent, Username: user, Password: password, HTTP: &http.Client{Transport: direct}},
		volume: e.claimPath(module.RegistryPVCName)}
	require.True(t, strings.HasPrefix(r.pull, "localhost:"), "the pull address is the NodePort on localhost: %s", r.pull)
	// Ready says the registry Pod passed its readiness probe; kube-proxy
	// programs its Service on its own time.
	framework.WaitFor(t, time.Minute, "the registry to answer at its Service", func(context.Context) (bool, string, error) {
		_, err := r.stored()
		return err == nil, fmt.Sprint(err), nil
	}, framework.DumpPods(e.c, ns))
	return r
}

// measureRegistryEvery makes the in-cluster manager (objs: its applied
// manifest) measure the internal registry at that interval instead of
// every 5 minutes, and waits until its rolled Pod is the only Ready one.
func (e *env) measureRegistryEvery(objs []*unstructured.Unstructured, every string) {
	e.t.Helper()
	arg := "--registry-usage-every=" + every
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		// The whole object again (what the e2e field manager leaves out it
		// gives up), without what the API server wrote into it.
		d := o.DeepCopy()
		d.SetManagedFields(nil)
		d.SetResourceVersion("")
		d.SetUID("")
		d.SetCreationTimestamp(metav1.Time{})
		d.SetGeneration(0)
		unstructured.RemoveNestedField(d.Object, "status")
		containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		require.NoError(e.t, err)
		ctr := containers[0].(map[string]any)
		ctr["args"] = append(ctr["args"].([]any), arg)
		require.NoError(e.t, unstructured.SetNestedSlice(d.Object, containers, "spec", "template", "spec", "containers"))
		require.NoError(e.t, e.cluster.Apply(e.t.Context(), ns, d))
	}
	labels := map[string]string{"app.kubernetes.io/name": "serverless-manager"}
	framework.WaitFor(e.t, 2*time.Minute, "the manager's Pod measuring every "+every+" to be the only Ready one", func(ctx context.Context) (bool, string, error) {
		p, err := e.cluster.ReadyPod(ctx, ns, labels)
		if err != nil {
			return false, err.Error(), nil
		}
		return slices.Contains(p.Spec.Containers[0].Args, arg), p.Name + " " + strings.Join(p.Spec.Containers[0].Args, " "), nil
	}, framework.DumpPods(e.c, ns), e.cluster.DumpPodLogs(ns, labels, 20))
}

// claimPath is the host path of the PersistentVolume the claim in the
// module namespace is bound to.
func (e *env) claimPath(claim string) string {
	e.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(e.t, e.c.Get(e.t.Context(), types.NamespacedName{Namespace: ns, Name: claim}, pvc))
	require.NotEmpty(e.t, pvc.Spec.VolumeName, "claim %s is bound", claim)
	pv := &corev1.PersistentVolume{}
	require.NoError(e.t, e.c.Get(e.t.Context(), types.NamespacedName{Name: pvc.Spec.VolumeName}, pv))
	require.NotNil(e.t, pv.Spec.HostPath, "PersistentVolume %s is a host path", pv.Name)
	return pv.Spec.HostPath.Path
}

// stored lists repository → digests the registry holds by tag.
func (r *internalRegistry) stored() (map[string][]string, error) {
	return registryContents(r.service, remote.WithTransport(direct), r.auth)
}

// registryContents lists repository → digests the registry at address
// holds by tag. A clean-up round may delete while it lists: an image gone
// between the listing and its look-up is left out, as a later listing
// would.
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
			var gone *transport.Error
			if errors.As(err, &gone) && gone.StatusCode == http.StatusNotFound {
				continue // deleted since the listing: a clean-up round runs meanwhile
			}
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

// blobsOf are the digests of every blob the registry's images consist of
// (manifest, config, layers) for the repository → digests given.
func (r *internalRegistry) blobsOf(images map[string][]string) ([]string, error) {
	var out []string
	for repo, digests := range images {
		for _, d := range digests {
			ref, err := name.NewDigest(r.service+"/"+repo+"@"+d, name.Insecure)
			if err != nil {
				return nil, err
			}
			img, err := remote.Image(ref, remote.WithTransport(direct), r.auth)
			if err != nil {
				return nil, err
			}
			m, err := img.Manifest()
			if err != nil {
				return nil, err
			}
			out = append(out, d, m.Config.Digest.String())
			for _, l := range m.Layers {
				out = append(out, l.Digest.String())
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// volumeBlobs are the digests of the blobs on the registry's volume, as
// distribution lays them out (docker/registry/v2/blobs/sha256/xx/<hex>/data).
func (r *internalRegistry) volumeBlobs() ([]string, error) {
	root := filepath.Join(r.volume, "docker", "registry", "v2", "blobs")
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "data" {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		parts := strings.Split(rel, string(filepath.Separator)) // sha256, xx, hex, data
		if len(parts) != 4 {
			return fmt.Errorf("unexpected blob path %s", p)
		}
		out = append(out, parts[0]+":"+parts[2])
		return nil
	})
	if os.IsNotExist(err) {
		return nil, nil
	}
	slices.Sort(out)
	return out, err
}

func TestBuildsWithTheInternalRegistry(t *testing.T) {
	b := startInternalRegistry(t, true)
	ctx := t.Context()
	fnNS := b.cluster.Namespace(t, "internalreg")
	deps := `{"name": "hello", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}`
	require.NoError(t, b.fcs.Create(ctx, realFunction(fnNS, "hello", isNumberHandler("hello"), deps)))
	image := b.runningDigest(fnNS, "hello", "")
	pod := b.buildPod(fnNS, "hello")
	assert.Contains(t, b.stepLog(pod, stepDependencies), "added 1 package")
	t.Logf("build: %s; runs %s", stepTimes(pod), image)
	// The node pulled it through the NodePort: the Function answers.
	b.cluster.WaitForAnswer(t, time.Minute, fnNS, "hello", "/", func(body string) bool {
		return body == "hello: 42 true, x false"
	}, b.dumpsFor(fnNS, "hello")...)

	// Nodes pull it by the pull address (this machine too, through the
	// NodePort) with the credentials of the registry Secret; anonymous
	// pulls are refused.
	require.True(t, strings.HasPrefix(image, b.pull+"/"), "the Deployment pulls %s from the pull address %s", image, b.pull)
	ref, err := name.ParseReference(image, name.Insecure)
	require.NoError(t, err)
	require.NoError(t, pullAll(ref, remote.WithTransport(direct), b.auth), "the built image pulls whole")
	_, err = remote.Get(ref, remote.WithTransport(direct))
	require.Error(t, err, "the internal registry refuses anonymous pulls")

	// The registry-agent sidecar runs beside it on the same volume: it sees
	// the Function's image, its kept dependency layer and the copy of the
	// runtime base the first build keeps beside it (the base itself is in
	// the node's registry), and its GC, with nothing
	// deleted, keeps every blob.
	usage, err := b.agent.Usage(ctx)
	require.NoError(t, err)
	t.Logf("registry usage: %+v", usage)
	assert.Equal(t, 3, usage.TaggedImages, "Function image, dependency layer, the runtime base's copy")
	assert.Positive(t, usage.UsedBytes)
	gc, err := b.agent.GC(ctx)
	require.NoError(t, err)
	t.Logf("registry GC: %+v", gc)
	assert.Zero(t, gc.BlobsDeleted, "every blob belongs to a tagged image")

	// The Serverless CR says how full the registry is: the manager, a Pod
	// of the cluster, asks the agent by its Service name.
	cr := b.waitFor("default", "the status to count the registry's 3 images", time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.InternalRegistry != nil && cr.Status.InternalRegistry.Images == usage.TaggedImages
	})
	u := cr.Status.InternalRegistry
	t.Logf("status.internalRegistry: %+v", *u)
	assert.Positive(t, u.UsedBytes)
	assert.Positive(t, u.TotalBytes)
	assert.Equal(t, v1alpha1.StateReady, cr.Status.State, "far from full")
	require.NoError(t, pullAll(ref, remote.WithTransport(direct), b.auth), "the built image still pulls after the GC")
}

// The clean-up keeps exactly what is used: Functions with the same
// dependencies built, some deleted, some changed twice → the current images
// of those left, the previous ones of those changed (not their first) and
// one dependency layer. (The runtime base, which the stand-in runtime used
// to add here, is the local runtime image in the node's registry: builds
// read it there and push only its layers here, shared by every image.)
// The volume holds exactly the blobs of the images kept; pulls of the
// running images throughout the clean-up never fail.
//
// 8 Functions, 3 deleted, 2 changed twice: 12 real builds, at most 5 at a
// time (the controller's default), each case with more than one Function:
// images of deleted Functions, first images replaced twice, previous images
// kept for a rollback, one shared dependency layer, blobs freed, pulls
// unharmed. More Functions add minutes on the real node's 2 CPUs (12, 4
// and 3 took 4 minutes) and no case.
func TestRegistryKeepsOnlyWhatIsUsed(t *testing.T) {
	b := startInternalRegistry(t, false)
	ctx := t.Context()
	fnNS := b.cluster.Namespace(t, "cleanup")
	deps := `{"name": "fn", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}`
	const total, deleted, changed = 8, 3, 2
	names := make([]string, total)
	start := time.Now()
	for i := range names {
		names[i] = fmt.Sprintf("fn-%02d", i)
		require.NoError(t, b.fcs.Create(ctx, realFunction(fnNS, names[i], isNumberHandler(names[i]), deps)))
	}
	first := map[string]string{}
	for _, n := range names {
		first[n] = b.runningDigest(fnNS, n, "")
	}
	t.Logf("%d Functions built and Running in %s; first build: %s; last: %s", total, time.Since(start).Round(time.Second),
		stepTimes(b.buildPod(fnNS, names[0])), stepTimes(b.buildPod(fnNS, names[total-1])))
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
		b.editFunction(fnNS, n, func(fn *v1alpha2.Function) { fn.Spec.Source.Inline.Source = isNumberHandler(n + text) })
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
	t.Logf("deletes and %d rebuilds done %s after the start", 2*changed, time.Since(start).Round(time.Second))

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
		}, b.dumpController())
	assert.Len(t, last["serverless-dependencies"], 2, "one dependency layer, shared, and the runtime base's copy")
	assert.Len(t, last, total-deleted+1, "nothing else in the registry: %v", last)
	// The images' own blobs left the volume (the garbage collection runs
	// right after the deletes, in the same round): what is on it is
	// exactly what the kept images consist of.
	wantBlobs, err := b.blobsOf(last)
	require.NoError(t, err)
	var after registryagent.Usage
	framework.WaitFor(t, time.Minute, "the registry's volume to hold exactly the kept images' blobs", func(ctx context.Context) (bool, string, error) {
		onVolume, err := b.volumeBlobs()
		if err != nil {
			return false, "", err
		}
		after, err = b.agent.Usage(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		extra, missing := difference(onVolume, wantBlobs), difference(wantBlobs, onVolume)
		return len(extra) == 0 && len(missing) == 0 && after.Manifests == after.TaggedImages,
			fmt.Sprintf("%d blobs on the volume, %d not of a kept image %v, %d missing %v; agent: %d manifests, %d tagged images, %d bytes (%d before)",
				len(onVolume), len(extra), extra, len(missing), missing, after.Manifests, after.TaggedImages, after.UsedBytes, before.UsedBytes), nil
	}, b.dumpController())
	t.Logf("registry: %d images, %d blobs, %d bytes before; %d images, %d blobs, %d bytes after the clean-up",
		before.TaggedImages, before.Blobs, before.UsedBytes, after.TaggedImages, after.Blobs, after.UsedBytes)
	n, failures := pulls()
	assert.Empty(t, failures, "no pull of a running image failed")
	assert.Positive(t, n)
	t.Logf("%d pulls during the clean-up, none failed; %s in all", n, time.Since(start).Round(time.Second))
	// Each Function image has three blobs of its own (source layer, config,
	// manifest); the base layers and the dependency layer are shared.
	assert.Equal(t, before.Blobs+3*changed-3*deleted, after.Blobs, "the changed Functions' new blobs came (two images, one went), the deleted Functions' went")
}

// difference is what a holds and b does not (both sorted).
func difference(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found {
			out = append(out, x)
		}
	}
	return out
}

// pullLoop pulls the given Functions' images (manifest, config and every
// layer) by their pull address, as nodes do, over and over until the
// returned stop is called, which reports the number of pulls and the
// failures. A short pause between pulls leaves the registry (400m CPU) and
// the node's 2 CPUs to the builds that push meanwhile.
func (r *internalRegistry) pullLoop(fns []string, images map[string]string) (stop func() (int, []string)) {
	refs := make([]name.Reference, 0, len(fns))
	for _, n := range fns {
		ref, err := name.ParseReference(images[n], name.Insecure)
		require.NoError(r.t, err)
		refs = append(refs, ref)
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
				err := pullAll(ref, remote.WithTransport(direct), r.auth)
				mu.Lock()
				count++
				if err != nil {
					failures = append(failures, fmt.Sprintf("%s: %v", ref, err))
				}
				mu.Unlock()
				select {
				case <-done:
					return
				case <-time.After(200 * time.Millisecond):
				}
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

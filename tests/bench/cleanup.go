package main

// The clean-up bench (-cleanup): the internal registry as the module
// installs it, its Pod run here (tests/framework/localnode: distribution and
// the registry agent on the claim's host path), real builds, as
// tests/e2e's TestRegistryKeepsOnlyWhatIsUsed: 20 Functions built, 8
// deleted, 5 changed twice. No round runs meanwhile; then one round, alone
// on a quiet controller: the registry's bytes before and after (blobs and
// everything on the volume), the round's duration, its requests to the API
// server (audit log) and to the registry and its agent (counted in the
// node's network, which every request to a Service name goes through).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
	"github.com/kyma-project/serverless-manager/tests/framework"
	"github.com/kyma-project/serverless-manager/tests/framework/buildrun"
	"github.com/kyma-project/serverless-manager/tests/framework/localnode"
)

const (
	cleanupFunctions, cleanupDeleted, cleanupChanged = 20, 8, 5
	cleanupDependencies                              = `{"name": "fn", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}`
	// cleanupRoundAfter: the measured round comes this long after the
	// controller started again (no other round before it).
	cleanupRoundAfter = 30 * time.Second
)

type cleanupBench struct {
	*fnBench
	network  *localnode.Network
	runner   *buildrun.Runner
	push     string
	auth     authn.Authenticator
	agent    *registryagent.Client
	volume   string
	base, ns string
}

func runCleanup() error {
	ctx := context.Background()
	b, release, err := startFnBench(ctx)
	if err != nil {
		return err
	}
	defer release()
	cb := &cleanupBench{fnBench: b, ns: "bench-cleanup"}
	if cb.network, err = localnode.StartNetwork(); err != nil {
		return err
	}
	defer func() { _ = cb.network.Close() }()

	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: framework.ManagerNamespace, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}}}
	if err := b.c.Create(ctx, cr); err != nil {
		return fmt.Errorf("creating the Serverless CR (is one left from an earlier run?): %w", err)
	}
	defer b.uninstall(cr)
	if err := b.waitReady(ctx, 1, 3*time.Minute); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "bench-cleanup-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	root := b.cluster.Root()
	node := &localnode.Node{Client: b.c, BinDir: filepath.Join(root, "bin"), AssetsDir: filepath.Join(root, "bin", "assets"),
		Dir: tmp, LogDir: b.cluster.LogDir(), Network: cb.network, Report: func(err error) { b.log("local node: " + err.Error()) }}
	cb.runner = node.BuildRunner(os.Getenv("PATH"))
	return b.withBuildPods(ctx, cb.runner, cb.ns, cb.measure, func(ctx context.Context) {
		node.RunDeployment(ctx, framework.ManagerNamespace, module.RegistryServiceName)
	})
}

func (cb *cleanupBench) measure(ctx context.Context) error {
	if err := cb.connect(ctx); err != nil {
		return err
	}
	// No round during the builds, deletes and edits.
	quiet := append(cb.network.Env(), "APP_REGISTRY_CLEANUP_DELAY=1h", "APP_REGISTRY_CLEANUP_INTERVAL=1h")
	fc, err := cb.startController(ctx, "bench-function-controller-cleanup-builds", quiet)
	if err != nil {
		return err
	}
	cb.log(fmt.Sprintf("%d Functions with npm dependencies, built for real", cleanupFunctions))
	names := make([]string, cleanupFunctions)
	for i := range names {
		names[i] = fmt.Sprintf("fn-%02d", i)
		if err := cb.fcs.Create(ctx, cb.function(names[i], names[i])); err != nil {
			return errors.Join(err, fc.Stop())
		}
	}
	for _, n := range names {
		if err := cb.waitImage(ctx, n, ""); err != nil {
			return errors.Join(err, fc.Stop())
		}
	}
	cb.log(fmt.Sprintf("deleting %d, changing %d twice", cleanupDeleted, cleanupChanged))
	for _, n := range names[:cleanupDeleted] {
		if err := cb.fcs.Delete(ctx, &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: cb.ns, Name: n}}); err != nil {
			return errors.Join(err, fc.Stop())
		}
	}
	for _, text := range []string{" again", " and again"} {
		for _, n := range names[cleanupDeleted : cleanupDeleted+cleanupChanged] {
			if err := cb.change(ctx, n, text); err != nil {
				return errors.Join(err, fc.Stop())
			}
		}
	}
	if err := fc.Stop(); err != nil {
		return err
	}
	before, err := cb.bytes(ctx)
	if err != nil {
		return err
	}

	cb.log(fmt.Sprintf("the controller again, its first round %s after its start", cleanupRoundAfter))
	round := append(cb.network.Env(), "APP_REGISTRY_CLEANUP_DELAY=1h", fmt.Sprintf("APP_REGISTRY_CLEANUP_INTERVAL=%s", cleanupRoundAfter))
	fc, err = cb.startController(ctx, "bench-function-controller-cleanup-round", round)
	if err != nil {
		return err
	}
	defer func() { _ = fc.Stop() }()
	// The log file goes on from earlier runs of the same name.
	logStart, err := fileSize(fc.LogPath())
	if err != nil {
		return err
	}
	user := framework.AuditUser(module.FunctionController())
	if _, err := cb.settle(mustMark(cb.cluster), user); err != nil {
		return err
	}
	mark, err := cb.cluster.MarkAudit()
	if err != nil {
		return err
	}
	var reqMu sync.Mutex
	requests := map[string]int{}
	cb.network.Observe(func(hostport string, r *http.Request) {
		reqMu.Lock()
		defer reqMu.Unlock()
		requests[requestKind(hostport, r)]++
	})
	defer cb.network.Observe(nil)
	line, err := cb.waitRound(ctx, fc, logStart)
	if err != nil {
		return err
	}
	api, err := cb.settle(mark, user)
	if err != nil {
		return err
	}
	cb.network.Observe(nil)
	after, err := cb.bytes(ctx)
	if err != nil {
		return err
	}

	fmt.Printf("\nRegistry clean-up (internal registry run here, %d Functions built for real with %s, %d deleted, %d changed twice; one round on a quiet controller)\n",
		cleanupFunctions, cleanupDependencies, cleanupDeleted, cleanupChanged)
	fmt.Printf("  images: %d before → %d after (round: kept %v, deleted %v)\n", before.images, after.images, line["kept"], line["deleted"])
	fmt.Printf("  blob bytes: %d → %d (%.1f %%); on the volume: %d → %d (%.1f %%)\n",
		before.blobs, after.blobs, pct(after.blobs, before.blobs), before.disk, after.disk, pct(after.disk, before.disk))
	fmt.Printf("  round: %v, builds paused %v; of it the agent's GC %v: %v → %v bytes\n", line["took"], line["buildsPaused"], line["gcTook"], line["bytesBefore"], line["bytesAfter"])
	fmt.Printf("  requests to the API server: %d (%s)\n", api.total(), breakdownOf(api.byKind))
	reqMu.Lock()
	defer reqMu.Unlock()
	fmt.Printf("  requests to the registry and its agent: %d (%s)\n", sum(requests), breakdownOf(requests))
	return nil
}

// connect reads the registry's addresses and credentials and waits until
// it takes a push: the runtime stand-in the Functions are built on.
func (cb *cleanupBench) connect(ctx context.Context) error {
	secret := &corev1.Secret{}
	if err := cb.c.Get(ctx, client.ObjectKey{Namespace: framework.ManagerNamespace, Name: module.RegistrySecretName}, secret); err != nil {
		return err
	}
	user, password := string(secret.Data["username"]), string(secret.Data["password"])
	cb.push, cb.auth = string(secret.Data["pushRegAddr"]), &authn.Basic{Username: user, Password: password}
	cb.agent = &registryagent.Client{URL: registryagent.URL(framework.ManagerNamespace), Username: user, Password: password,
		HTTP: &http.Client{Transport: cb.network.Transport()}}
	img, err := framework.StandIn("function-runtime-nodejs22")
	if err != nil {
		return err
	}
	cb.base = cb.push + "/stand-in/function-runtime-nodejs22:bench"
	ref, err := name.ParseReference(cb.base, name.Insecure)
	if err != nil {
		return err
	}
	if err := framework.Poll(ctx, time.Minute, "the internal registry to take the runtime stand-in", func(ctx context.Context) (bool, string, error) {
		err := remote.Write(ref, img, remote.WithAuth(cb.auth), remote.WithTransport(cb.network.Transport()), remote.WithContext(ctx))
		return err == nil, fmt.Sprint(err), nil
	}); err != nil {
		return err
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := cb.c.Get(ctx, client.ObjectKey{Namespace: framework.ManagerNamespace, Name: module.RegistryPVCName}, pvc); err != nil {
		return err
	}
	pv := &corev1.PersistentVolume{}
	if err := cb.c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return err
	}
	if pv.Spec.HostPath == nil {
		return fmt.Errorf("PersistentVolume %s has no host path", pv.Name)
	}
	cb.volume = pv.Spec.HostPath.Path
	return nil
}

func (cb *cleanupBench) startController(ctx context.Context, name string, env []string) (*framework.PodProcess, error) {
	fc, err := cb.cluster.StartFunctionController(ctx, name, env...)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, "http://"+fc.Plan.Addresses["health"]+"/readyz", fc.Process); err != nil {
		return nil, errors.Join(err, fc.Stop())
	}
	return fc, nil
}

func (cb *cleanupBench) function(name, greeting string) *v1alpha2.Function {
	return builtHere(cb.ns, name, cb.base, fmt.Sprintf("module.exports = { main: () => %q };\n", greeting), cleanupDependencies)
}

// change edits the source and waits for the new image to run.
func (cb *cleanupBench) change(ctx context.Context, name, text string) error {
	fn := &v1alpha2.Function{}
	if err := cb.fcs.Get(ctx, client.ObjectKey{Namespace: cb.ns, Name: name}, fn); err != nil {
		return err
	}
	before := fn.Status.BuiltImage
	fn.Spec.Source.Inline.Source = strings.Replace(fn.Spec.Source.Inline.Source, `"`+name, `"`+name+text, 1)
	if err := cb.fcs.Update(ctx, fn); err != nil {
		return err
	}
	return cb.waitImage(ctx, name, before)
}

// waitImage waits for the Function to run an image by digest other than not.
func (cb *cleanupBench) waitImage(ctx context.Context, name, not string) error {
	return framework.Poll(ctx, 5*time.Minute, "Function "+name+" to run a new image", func(ctx context.Context) (bool, string, error) {
		fn := &v1alpha2.Function{}
		if err := cb.fcs.Get(ctx, client.ObjectKey{Namespace: cb.ns, Name: name}, fn); err != nil {
			return false, "", err
		}
		return isRunning(fn) && strings.Contains(fn.Status.BuiltImage, "@sha256:") && fn.Status.BuiltImage != not, waitingOn(fn), nil
	})
}

type registryBytes struct {
	images      int
	blobs, disk int64
}

// bytes are the registry's blob bytes and all its bytes on the volume
// (blobs and distribution's link files), and its tagged images.
func (cb *cleanupBench) bytes(ctx context.Context) (registryBytes, error) {
	u, err := cb.agent.Usage(ctx)
	if err != nil {
		return registryBytes{}, err
	}
	vol := &framework.Registry{Root: cb.volume}
	blobs, err := vol.BlobBytes()
	if err != nil {
		return registryBytes{}, err
	}
	disk, err := vol.DiskBytes()
	return registryBytes{images: u.TaggedImages, blobs: blobs, disk: disk}, err
}

// waitRound waits for the controller's log line of a finished round
// (written past offset) and returns its fields.
func (cb *cleanupBench) waitRound(ctx context.Context, fc *framework.PodProcess, offset int64) (map[string]any, error) {
	var line map[string]any
	err := framework.Poll(ctx, cleanupRoundAfter+3*time.Minute, "a registry clean-up round", func(context.Context) (bool, string, error) {
		f, err := os.Open(fc.LogPath())
		if err != nil {
			return false, "", err
		}
		defer func() { _ = f.Close() }()
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return false, "", err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var l map[string]any
			if json.Unmarshal(sc.Bytes(), &l) == nil && l["msg"] == "registry clean-up" {
				if l["error"] != nil {
					return false, "", framework.StopWaiting(fmt.Errorf("the round failed: %s", sc.Text()))
				}
				line = l
			}
		}
		return line != nil, "", sc.Err()
	}, func() string { return fc.Tail(30) })
	return line, err
}

// requestKind names a request to the registry or its agent by what it
// asks for.
func requestKind(hostport string, r *http.Request) string {
	_, port, _ := net.SplitHostPort(hostport)
	target := "registry"
	if port == fmt.Sprint(registryagent.Port) {
		target = "agent"
	}
	p := r.URL.Path
	kind := p
	switch {
	case p == "/v2/" || p == "/v2":
		kind = "ping"
	case strings.HasSuffix(p, "/_catalog"):
		kind = "catalog"
	case strings.HasSuffix(p, "/tags/list"):
		kind = "tags"
	case strings.Contains(p, "/manifests/"):
		kind = "manifest"
	case strings.Contains(p, "/blobs/"):
		kind = "blob"
	}
	return fmt.Sprintf("%s %s %s", target, r.Method, kind)
}

func breakdownOf(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

func sum(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func pct(after, before int64) float64 {
	if before == 0 {
		return 0
	}
	return 100 * float64(after-before) / float64(before)
}

func mustMark(c *framework.Cluster) framework.AuditMark {
	m, _ := c.MarkAudit()
	return m
}

func fileSize(path string) (int64, error) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

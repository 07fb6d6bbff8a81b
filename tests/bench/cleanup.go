package main

// The clean-up bench (-cleanup): the internal registry as the module
// installs it, its Pod on the real node (distribution and the registry
// agent on the claim's volume, a host path PersistentVolume), the Function
// controller as its Deployment's Pod, real builds, as tests/e2e's
// TestRegistryKeepsOnlyWhatIsUsed: 20 Functions built, 8 deleted, 5
// changed twice. No round runs meanwhile (the manager renders a copy of
// the chart whose controller waits an hour for a round); then the manager
// renders a copy whose controller runs its first round cleanupRoundAfter
// after its start, which rolls the controller's Deployment, and that round
// runs alone on a quiet controller: the registry's bytes before and after
// (blobs and everything on the volume), the round's duration (the
// controller's log), its requests to the API server (audit log), to the
// registry (distribution's access log: every request, one line each) and
// to its agent (its log: one line per garbage collection).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
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
)

const (
	cleanupFunctions, cleanupDeleted, cleanupChanged = 20, 8, 5
	cleanupDependencies                              = `{"name": "fn", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}`
	// cleanupRoundAfter: the measured round comes this long after the
	// controller started again (no other round before it).
	cleanupRoundAfter = 30 * time.Second
)

// registryLabels select the internal registry's Pod.
var registryLabels = map[string]string{"app.kubernetes.io/name": "serverless-docker-registry"}

// The registry Pod's containers.
const (
	registryContainer = "registry"
	agentContainer    = "registry-agent"
)

type cleanupBench struct {
	*fnBench
	// service is the registry Service's cluster IP and port (what build
	// Pods push to by its name), reached here through kube-proxy.
	service string
	auth    remote.Option
	agent   *registryagent.Client
	// volume is the host path of the registry claim's PersistentVolume.
	volume string
	ns     string
}

func runCleanup() error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "bench-cleanup-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	root, err := repoRoot()
	if err != nil {
		return err
	}
	// No round while building; then the first round cleanupRoundAfter
	// after the controller's (new) start.
	quiet, err := cleanupChart(root, filepath.Join(tmp, "quiet"), time.Hour, time.Hour)
	if err != nil {
		return err
	}
	round, err := cleanupChart(root, filepath.Join(tmp, "round"), time.Hour, cleanupRoundAfter)
	if err != nil {
		return err
	}
	b, release, err := startFnBench(ctx, "--chart-path="+quiet)
	if err != nil {
		return err
	}
	defer release()
	cb := &cleanupBench{fnBench: b, ns: "bench-cleanup"}

	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: framework.ManagerNamespace, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)},
			DefaultBuildJobPreset: realBuildPreset, DefaultRuntimePodPreset: realFunctionPreset}}
	if err := b.c.Create(ctx, cr); err != nil {
		return fmt.Errorf("creating the Serverless CR (is one left from an earlier run?): %w", err)
	}
	defer b.uninstall(cr)
	if err := b.waitReady(ctx, 1, 3*time.Minute); err != nil {
		return err
	}
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cb.ns}}); err != nil {
		return fmt.Errorf("namespace %s (left from an earlier run?): %w", cb.ns, err)
	}
	defer b.deleteNamespaces([]string{cb.ns})
	return cb.measure(ctx, round)
}

// repoRoot is the repository (the cluster's root).
func repoRoot() (string, error) {
	c, err := framework.EnsureCluster(context.Background())
	if err != nil {
		return "", err
	}
	return c.Root(), nil
}

// cleanupChart writes a copy of the chart to dir whose Function controller
// runs clean-up rounds delay after a Deployment's image changed or it went,
// and every interval regardless, and returns dir (the manager's
// --chart-path). The chart itself leaves them at their defaults (10 s and
// an hour).
func cleanupChart(root, dir string, delay, interval time.Duration) (string, error) {
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "charts", "serverless"))); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "templates", "controller-deployment.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	const anchor = "            - name: APP_REGISTRY_CLEANUP_EXTERNAL\n"
	if n := strings.Count(string(data), anchor); n != 1 {
		return "", fmt.Errorf("%s: the controller's env anchor %q found %d times", path, strings.TrimSpace(anchor), n)
	}
	timing := fmt.Sprintf("            - name: APP_REGISTRY_CLEANUP_DELAY\n              value: %q\n"+
		"            - name: APP_REGISTRY_CLEANUP_INTERVAL\n              value: %q\n", delay, interval)
	return dir, os.WriteFile(path, []byte(strings.Replace(string(data), anchor, timing+anchor, 1)), 0o644)
}

func (cb *cleanupBench) measure(ctx context.Context, roundChart string) error {
	if err := cb.connect(ctx); err != nil {
		return err
	}
	old, err := cb.controllerPod(ctx, "", nil)
	if err != nil {
		return err
	}
	cb.log(fmt.Sprintf("%d Functions with npm dependencies, built for real on the real node", cleanupFunctions))
	names := make([]string, cleanupFunctions)
	for i := range names {
		names[i] = fmt.Sprintf("fn-%02d", i)
		if err := cb.fcs.Create(ctx, cb.function(names[i], names[i])); err != nil {
			return err
		}
	}
	for _, n := range names {
		if err := cb.waitImage(ctx, n, ""); err != nil {
			return err
		}
	}
	cb.log(fmt.Sprintf("deleting %d, changing %d twice", cleanupDeleted, cleanupChanged))
	for _, n := range names[:cleanupDeleted] {
		if err := cb.fcs.Delete(ctx, &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: cb.ns, Name: n}}); err != nil {
			return err
		}
	}
	for _, text := range []string{" again", " and again"} {
		for _, n := range names[cleanupDeleted : cleanupDeleted+cleanupChanged] {
			if err := cb.change(ctx, n, text); err != nil {
				return err
			}
		}
	}
	before, err := cb.bytes(ctx)
	if err != nil {
		return err
	}
	baseBytes, err := cb.baseLayerBytes(ctx, names[len(names)-1])
	if err != nil {
		return err
	}

	cb.log(fmt.Sprintf("the controller again (the manager renders it with its first round %s after its start: its Deployment rolls)", cleanupRoundAfter))
	if err := cb.restartManagerWith(ctx, "bench-manager-cleanup-round", "--chart-path="+roundChart); err != nil {
		return err
	}
	interval := cleanupRoundAfter.String()
	pod, err := cb.controllerPod(ctx, "with rounds every "+interval, func(p *corev1.Pod) (bool, string) {
		if p.UID == old.UID {
			return false, "still the Pod from before"
		}
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == "APP_REGISTRY_CLEANUP_INTERVAL" {
				return e.Value == interval, e.Name + "=" + e.Value
			}
		}
		return false, "no APP_REGISTRY_CLEANUP_INTERVAL"
	})
	if err != nil {
		return err
	}
	registry, err := cb.cluster.ReadyPod(ctx, framework.ManagerNamespace, registryLabels)
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
	since := time.Now()
	line, at, err := cb.waitRound(ctx, pod)
	if err != nil {
		return err
	}
	if at.Before(since) {
		return fmt.Errorf("the round ran at %s, before the measurement started (%s): the controller's start-up took longer than %s",
			at.Format(time.RFC3339Nano), since.Format(time.RFC3339Nano), cleanupRoundAfter)
	}
	api, err := cb.settle(mark, user)
	if err != nil {
		return err
	}
	requests, others, err := cb.registryRequests(ctx, registry, pod, since)
	if err != nil {
		return err
	}
	agentLines, err := cb.logLines(ctx, registry.Namespace, registry.Name, agentContainer, since)
	if err != nil {
		return err
	}
	gcs, agentErrors := 0, 0
	for _, l := range agentLines {
		var m map[string]any
		if json.Unmarshal([]byte(l.text), &m) != nil {
			continue
		}
		switch {
		case m["msg"] == "garbage collected":
			gcs++
		case m["level"] == "error":
			agentErrors++
		}
	}
	after, err := cb.bytes(ctx)
	if err != nil {
		return err
	}

	fmt.Printf("\nRegistry clean-up (internal registry as its Pod on the real node, %d Functions built for real with %s, %d deleted, %d changed twice; one round on a quiet controller Pod)\n",
		cleanupFunctions, cleanupDependencies, cleanupDeleted, cleanupChanged)
	fmt.Printf("  images: %d before → %d after (round: kept %v, deleted %v); the runtime base is the local image in the node's registry, no tag here\n",
		before.images, after.images, line["kept"], line["deleted"])
	fmt.Printf("  blob bytes: %d → %d (%.1f %%); on the volume: %d → %d (%.1f %%)\n",
		before.blobs, after.blobs, pct(after.blobs, before.blobs), before.disk, after.disk, pct(after.disk, before.disk))
	fmt.Printf("    of which the runtime base's layers, in every Function image (kept): %d bytes; without them, blobs %d → %d (%.1f %%)\n",
		baseBytes, before.blobs-baseBytes, after.blobs-baseBytes, pct(after.blobs-baseBytes, before.blobs-baseBytes))
	fmt.Printf("  round: %v, builds paused %v; of it the agent's GC %v: %v → %v bytes (the controller Pod's log)\n",
		line["took"], line["buildsPaused"], line["gcTook"], line["bytesBefore"], line["bytesAfter"])
	fmt.Printf("  requests to the API server: %d (%s)\n", api.total(), breakdownOf(api.byKind))
	fmt.Printf("  requests to the registry from the controller's Pod: %d (%s)\n", sum(requests), breakdownOf(requests))
	if len(others) > 0 {
		fmt.Printf("    and from elsewhere meanwhile: %d (%s)\n", sum(others), breakdownOf(others))
	}
	fmt.Printf("  requests to its agent: %d garbage collection(s), %d failed request(s)\n", gcs, agentErrors)
	fmt.Println("  (counted from the registry container's access log, kubelet's probes left out, and the agent's log, which records each POST /gc" +
		" and each failure but not GET /usage; before, a proxy in front of both counted them)")
	return nil
}

// connect reads the registry's address and credentials, its agent's and
// its volume's path, and waits until it answers at its Service.
func (cb *cleanupBench) connect(ctx context.Context) error {
	secret := &corev1.Secret{}
	if err := cb.c.Get(ctx, client.ObjectKey{Namespace: framework.ManagerNamespace, Name: module.RegistrySecretName}, secret); err != nil {
		return err
	}
	user, password := string(secret.Data["username"]), string(secret.Data["password"])
	var err error
	if cb.service, err = cb.cluster.ServiceAddress(ctx, framework.ManagerNamespace, module.RegistryServiceName, 5000); err != nil {
		return err
	}
	agent, err := cb.cluster.ServiceAddress(ctx, framework.ManagerNamespace, module.RegistryAgentServiceName, registryagent.Port)
	if err != nil {
		return err
	}
	cb.auth = remote.WithAuth(&authn.Basic{Username: user, Password: password})
	cb.agent = &registryagent.Client{URL: "http://" + agent, Username: user, Password: password, HTTP: &http.Client{Transport: direct}}
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
	// Ready says the registry Pod passed its readiness probe; kube-proxy
	// programs its Services on its own time.
	return framework.Poll(ctx, time.Minute, "the internal registry and its agent to answer at their Services", func(ctx context.Context) (bool, string, error) {
		reg, err := name.NewRegistry(cb.service, name.Insecure)
		if err != nil {
			return false, "", err
		}
		if _, err := remote.Catalog(ctx, reg, cb.auth, remote.WithTransport(direct)); err != nil {
			return false, err.Error(), nil
		}
		_, err = cb.agent.Usage(ctx)
		return err == nil, fmt.Sprint(err), nil
	}, framework.DumpPods(cb.c, framework.ManagerNamespace))
}

func (cb *cleanupBench) function(name, greeting string) *v1alpha2.Function {
	return nodeFunction(cb.ns, name, fmt.Sprintf("module.exports = { main: () => %q };\n", greeting), cleanupDependencies)
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
	}, framework.DumpPods(cb.c, cb.ns), cb.cluster.DumpPodLogs(cb.ns, map[string]string{v1alpha2.LabelFunctionName: name}, 20))
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
	blobs, err := orNone(vol.BlobBytes())
	if err != nil {
		return registryBytes{}, err
	}
	disk, err := orNone(vol.DiskBytes())
	return registryBytes{images: u.TaggedImages, blobs: blobs, disk: disk}, err
}

// baseLayerBytes is the size of the runtime base's layers in the image the
// Function fn runs: every layer but its dependency and source layers.
func (cb *cleanupBench) baseLayerBytes(ctx context.Context, fnName string) (int64, error) {
	fn := &v1alpha2.Function{}
	if err := cb.fcs.Get(ctx, client.ObjectKey{Namespace: cb.ns, Name: fnName}, fn); err != nil {
		return 0, err
	}
	// The built image names the pull address (localhost:<NodePort>): read
	// it at the Service instead.
	_, path, ok := strings.Cut(fn.Status.BuiltImage, "/")
	if !ok {
		return 0, fmt.Errorf("built image %q", fn.Status.BuiltImage)
	}
	ref, err := name.ParseReference(cb.service+"/"+path, name.Insecure)
	if err != nil {
		return 0, err
	}
	img, err := remote.Image(ref, cb.auth, remote.WithTransport(direct), remote.WithContext(ctx))
	if err != nil {
		return 0, err
	}
	layers, err := img.Layers()
	if err != nil || len(layers) < 2 {
		return 0, fmt.Errorf("image %s: %d layers, %v", ref, len(layers), err)
	}
	var n int64
	for _, l := range layers[:len(layers)-2] {
		size, err := l.Size()
		if err != nil {
			return 0, err
		}
		n += size
	}
	return n, nil
}

// waitRound waits for the controller Pod's log line of a finished round
// and returns its fields and when it was logged.
func (cb *cleanupBench) waitRound(ctx context.Context, pod *corev1.Pod) (map[string]any, time.Time, error) {
	var line map[string]any
	var at time.Time
	err := framework.Poll(ctx, cleanupRoundAfter+3*time.Minute, "a registry clean-up round", func(ctx context.Context) (bool, string, error) {
		lines, err := cb.logLines(ctx, pod.Namespace, pod.Name, controllerContainer, time.Time{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, l := range lines {
			var m map[string]any
			if json.Unmarshal([]byte(l.text), &m) != nil || m["msg"] != "registry clean-up" {
				continue
			}
			if m["error"] != nil {
				return false, "", framework.StopWaiting(fmt.Errorf("the round failed: %s", l.text))
			}
			line, at = m, l.at
			return true, "", nil
		}
		return false, fmt.Sprintf("%d log lines, no round yet", len(lines)), nil
	}, cb.controllerLog(pod))
	return line, at, err
}

// accessLine is distribution's access log (combined log format): client,
// request line, status, user agent.
var accessLine = regexp.MustCompile(`^(\S+) \S+ \S+ \[[^\]]*\] "(\S+) (\S+) [^"]*" (\d{3}) \S+ "[^"]*" "([^"]*)"`)

// registryRequests counts the requests in the registry container's access
// log from since on, by what they ask for: those from the controller's Pod
// and the others (kubelet's probes left out).
func (cb *cleanupBench) registryRequests(ctx context.Context, registry, controller *corev1.Pod, since time.Time) (fromController, others map[string]int, err error) {
	lines, err := cb.logLines(ctx, registry.Namespace, registry.Name, registryContainer, since)
	if err != nil {
		return nil, nil, err
	}
	fromController, others = map[string]int{}, map[string]int{}
	for _, l := range lines {
		m := accessLine.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		clientIP, method, uri, status, agent := m[1], m[2], m[3], m[4], m[5]
		if strings.HasPrefix(agent, "kube-probe/") {
			continue
		}
		kind := requestKind(method, uri, status)
		if clientIP == controller.Status.PodIP {
			fromController[kind]++
		} else {
			others[kind+" from "+clientIP+" "+agent]++
		}
	}
	return fromController, others, nil
}

// requestKind names a registry request by what it asks for.
func requestKind(method, uri, status string) string {
	p, _, _ := strings.Cut(uri, "?")
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
	return fmt.Sprintf("%s %s %s", method, kind, status)
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

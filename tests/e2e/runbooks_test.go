//go:build e2e

package e2e

// The migration runbooks (docs/user/technical-reference, the pages named
// *-migrate-*) as an administrator runs them: every shell block of a page
// up to its "Go Back" is run as written (bash with -euo pipefail, this
// repository's kubectl first on the PATH, in a working directory of its
// own), in order, and a block the page shows output for must print exactly
// that. The installation the runbook starts from is the one the takeover
// tests set up (takeover_test.go, takeover_buildless_test.go), with a
// stand-in for the old operator's own manifest (serverless-operator.yaml)
// beside it; the Serverless Manager's manifest is `make render` with the
// module's local images, so the manager runs as its Pod on the real node.
// What only Kyma's lifecycle manager does (it is not in the local cluster)
// the test does in its place, at the step of the page that waits for it.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/hack/render/manifests"
	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/tests/docs"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// TestRunbooks runs every migration runbook; tests/docs checks that each
// is named here.
func TestRunbooks(t *testing.T) {
	for _, s := range []subtest{
		{"04-71-migrate-from-1-8-4.md", runbookFrom184},
		{"04-72-migrate-from-1-13.md", runbookFrom113},
		{"04-73-migrate-with-lifecycle-manager.md", runbookWithLifecycleManager},
	} {
		t.Run(s.name, s.run)
	}
}

// runbook is one page and the working directory its commands run in.
type runbook struct {
	e    *env
	page docs.Page
	dir  string
	// installed is the Serverless Manager's manifest, as the page's
	// serverless-manager.yaml holds it.
	installed []*unstructured.Unstructured
}

// newRunbook reads the page and prepares its working directory with the
// manifests it names: serverless-operator.yaml, a stand-in for the old
// release's (see oldOperatorManifest), applied as a user applied it, and
// serverless-manager.yaml. It starts a test of its own (newEnv), whose
// cleanup uninstalls the module with the manager's Pod and then deletes the
// manager's manifest.
func newRunbook(t *testing.T, version string, labels map[string]string) *runbook {
	t.Helper()
	e := newEnv(t)
	p, err := docs.Read(docs.TechnicalReference + "/" + filepath.Base(t.Name()))
	require.NoError(t, err)
	r := &runbook{e: e, page: p, dir: t.TempDir()}

	out, err := manifests.Build(filepath.Join(e.cluster.Root(), "config", "default"), "", e.moduleImages()...)
	require.NoError(t, err)
	r.installed, err = manifest.Decode(out)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "serverless-manager.yaml"), out, 0o644))
	// Registered after newEnv's cleanup, so it runs first: the manager
	// uninstalls while its Pod still runs, then goes with its manifest.
	t.Cleanup(func() {
		if !t.Failed() {
			e.uninstallAll()
		}
		e.deleteManifest(r.installed, serverlessCRD)
	})

	ensureNamespace(t, e.c, ns)
	old := r.oldOperatorManifest(version, labels)
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "serverless-operator.yaml"), old, 0o644))
	t.Cleanup(func() { r.deleteOldOperator(context.Background(), e.c) }) // what a runbook that failed early left
	for _, cmd := range []string{
		"kubectl apply -f serverless-operator.yaml",
		"kubectl wait crd " + serverlessCRD + " --for=condition=Established --timeout=1m",
	} {
		out, err := r.sh(t.Context(), cmd)
		require.NoError(t, err, "%s: %s", cmd, out)
	}
	return r
}

// moduleImages is the cluster's local image environment for the module's
// own images only: the Functions of a taken-over installation run the
// published runtime images (see publishedRuntimes).
func (e *env) moduleImages() []string {
	var out []string
	for _, kv := range e.cluster.LocalImageEnv() {
		if key, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(key, "IMAGE_FUNCTION_") {
			out = append(out, kv)
		}
	}
	return out
}

// oldOperatorManifest is a stand-in for the manifest of serverless-operator
// <version>, the release asset serverless-operator.yaml a user installed it
// with: the Serverless CRD (this repository's; the old release's has the
// same group, kind and version), and the operator's ServiceAccount,
// ClusterRole, binding and Deployment. The Deployment's Pod goes to the
// simulated nodes (its image is not pullable here; the fixtures are what
// it installed), so it acts on nothing: the runbook's steps are about
// stopping it and removing its objects while keeping the CRD. labels go on
// every object but the CRD.
func (r *runbook) oldOperatorManifest(version string, labels map[string]string) []byte {
	t := r.e.t
	t.Helper()
	crd, err := os.ReadFile(filepath.Join(r.e.cluster.Root(), "config", "crd", "bases", "operator.kyma-project.io_serverlesses.yaml"))
	require.NoError(t, err)

	all := map[string]string{"app.kubernetes.io/name": "serverless-operator"}
	for k, v := range labels {
		all[k] = v
	}
	meta, err := yaml.Marshal(map[string]any{"labels": all})
	require.NoError(t, err)
	indent := func(s string, n int) string {
		pad := strings.Repeat(" ", n)
		return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
	}
	labelBlock := indent(string(meta), 2)
	objs := fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: serverless-operator
  namespace: kyma-system
%[1]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: serverless-operator-role
%[1]s
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: serverless-operator-rolebinding
%[1]s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: serverless-operator-role
subjects:
  - kind: ServiceAccount
    name: serverless-operator
    namespace: kyma-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: serverless-operator
  namespace: kyma-system
%[1]s
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: serverless-operator
  template:
    metadata:
      labels:
        app.kubernetes.io/name: serverless-operator
    spec:
      serviceAccountName: serverless-operator
      containers:
        - name: manager
          image: europe-docker.pkg.dev/kyma-project/prod/serverless-operator:%[2]s
`, labelBlock, version)
	return []byte(strings.TrimRight(string(crd), "\n") + "\n---\n" + objs)
}

// deleteOldOperator deletes the old operator's objects with c, but not the
// CRD, as the page's step and Kyma's lifecycle manager do.
func (r *runbook) deleteOldOperator(ctx context.Context, c client.Client) {
	t := r.e.t
	t.Helper()
	objs, err := manifest.ReadFile(filepath.Join(r.dir, "serverless-operator.yaml"))
	require.NoError(t, err)
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		require.NoError(t, client.IgnoreNotFound(c.Delete(ctx, o)), "deleting %s %s", o.GetKind(), o.GetName())
	}
}

// sh runs command as the page's reader runs it: bash, this repository's
// kubectl first on the PATH, KUBECONFIG set, in the runbook's directory.
// It must be called while the test runs (not from a cleanup).
// It returns the standard output; an error carries the standard error.
func (r *runbook) sh(ctx context.Context, command string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 12*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", command)
	c.Dir = r.dir
	// A discovery cache of its own: CRDs the test installs between
	// commands are known at once.
	c.Env = append(os.Environ(),
		"KUBECACHEDIR="+r.e.t.TempDir(),
		"KUBECONFIG="+r.e.cluster.KubeconfigPath(),
		"PATH="+filepath.Join(r.e.cluster.Root(), "bin", "assets")+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	return string(out), nil
}

// run runs the page's steps in order. A step whose text contains a key of
// instead is not run: its function does what the step waits for (what
// Kyma's lifecycle manager does); every key must match a step.
func (r *runbook) run(instead map[string]func()) {
	t := r.e.t
	t.Helper()
	steps := r.page.Steps()
	require.NotEmpty(t, steps, "%s has steps", r.page.Path)
	used := map[string]bool{}
	for _, s := range steps {
		replaced := false
		for key, do := range instead {
			if strings.Contains(s.Body, key) {
				t.Logf("%s line %d: done by the test in the lifecycle manager's place", r.page.Path, s.Line)
				do()
				used[key], replaced = true, true
			}
		}
		if !replaced {
			r.step(s)
		}
	}
	for key := range instead {
		assert.True(t, used[key], "%s: no step contains %q", r.page.Path, key)
	}
}

// step runs one step and requires the output the page shows for it.
func (r *runbook) step(s docs.Step) {
	t := r.e.t
	t.Helper()
	start := time.Now()
	out, err := r.sh(t.Context(), s.Body)
	t.Logf("%s line %d took %s", r.page.Path, s.Line, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s line %d:\n%s\n%v\n%s", r.page.Path, s.Line, s.Body, err, r.dump())
	}
	if s.Expected != "" && !assert.Equal(t, strings.TrimSpace(s.Expected), strings.TrimSpace(out), "%s line %d prints what the page shows:\n%s", r.page.Path, s.Line, s.Body) {
		t.Fatal(r.dump())
	}
}

// dump is what a failed step needs explained: the CR, events, the
// manager's log, the module's Pods.
func (r *runbook) dump() string {
	var b strings.Builder
	for _, d := range append(r.e.dumps("default"), framework.DumpPods(r.e.c, ns)) {
		b.WriteString(d())
		b.WriteString("\n")
	}
	return b.String()
}

// check runs the page's last step, its check, again: after the test has
// seen the module's Function controller look at every Function, what the
// check says still holds.
func (r *runbook) check() {
	steps := r.page.Steps()
	r.step(steps[len(steps)-1])
}

// From serverless-operator 1.8.4, installed by hand: the takeover test's
// installation and built Function.
func runbookFrom184(t *testing.T) {
	r := newRunbook(t, "1.8.4", nil)
	e := r.e
	inst := e.installUpstreamFixtures(t.Context())
	f, fnNS, d := e.functionBuiltBy184(inst)

	r.run(nil)

	f.controllerPod()
	f.waitFunction(fnNS, builtBy184, "to be Running under the module's controller", time.Minute, func(fn *v1alpha2.Function) bool {
		return isRunning(fn) && fn.Status.BuiltImage != ""
	})
	assert.Equal(t, 1, f.jobs.count(fnNS, builtBy184), "no new build Job: %v", f.jobs.names(fnNS, builtBy184))
	assert.Equal(t, d.UID, f.deployment(fnNS, builtBy184).UID, "the Function's Deployment is kept")
	r.check()
}

// From serverless-operator 1.13, installed by hand: the buildless takeover
// test's installation and Functions.
func runbookFrom113(t *testing.T) {
	r := newRunbook(t, "1.13.0", nil)
	e := r.e
	fnNS, names, before := e.installBuildlessUpstream()
	e.placeModule(framework.RealNode)

	r.run(nil)

	newFnEnv(t, e).waitReconciled(len(names))
	for _, name := range names {
		after, err := e.podsOf(t.Context(), fnNS, name)
		require.NoError(t, err)
		assert.Equal(t, before[name], after, "Function %s: same Deployment, generation, Pod template, ReplicaSets and Pods", name)
	}
	r.check()
}

// kymaManaged is the label Kyma's lifecycle manager puts on what it applies.
var kymaManaged = map[string]string{"operator.kyma-project.io/managed-by": "kyma"}

// A cluster on serverless-operator 1.13 that Kyma's lifecycle manager
// manages. The page's ModuleTemplate and ModuleReleaseMeta, from
// module-template/, are applied as it says, to the lifecycle manager's CRDs
// in this cluster. The Kyma CR is stored by a stand-in CRD, with the module on
// another channel than the one module-template/module-release-meta.yaml
// assigns, behind another module; the page's patch must set that channel
// on the module's entry only. The lifecycle manager is not here: at the
// page's step that waits for it, the test does what it does when the
// module's version changes, from module-template/: it applies the new
// manifest (server-side, forced, with its label), deletes what only the
// old manifest had, and creates the ModuleTemplate's default CR, which
// exists, so the CR stays as it is.
func runbookWithLifecycleManager(t *testing.T) {
	r := newRunbook(t, "1.13.0", kymaManaged)
	e := r.e
	ctx := t.Context()
	fnNS, names, before := e.installBuildlessUpstream()

	installStandInCRD(t, e.c, "Kyma")
	kc, err := e.cluster.NewClient(nil) // its mapper learns the new kind
	require.NoError(t, err)
	kyma := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.kyma-project.io/v1beta2", "kind": "Kyma",
		"metadata": map[string]any{"name": "default", "namespace": ns},
		"spec": map[string]any{"channel": "regular", "modules": []any{
			map[string]any{"name": "keda"},
			map[string]any{"name": "serverless", "channel": "fast", "customResourcePolicy": "CreateAndDelete"},
		}},
	}}
	require.NoError(t, kc.Create(ctx, kyma))
	t.Cleanup(func() { _ = kc.Delete(context.Background(), kyma) })

	root := e.cluster.Root()
	read := func(name string) *unstructured.Unstructured {
		objs, err := manifest.ReadFile(filepath.Join(root, "module-template", name))
		require.NoError(t, err)
		require.Len(t, objs, 1)
		return objs[0]
	}
	releaseMeta, template := read("module-release-meta.yaml"), read("template.yaml")
	channels, _, _ := unstructured.NestedSlice(releaseMeta.Object, "spec", "channels")
	require.Len(t, channels, 1)
	channel := channels[0].(map[string]any)["channel"].(string)
	require.NotEqual(t, "fast", channel, "the stand-in Kyma CR starts on another channel")
	defaultCR, found, err := unstructured.NestedMap(template.Object, "spec", "data")
	require.NoError(t, err)
	require.True(t, found, "the ModuleTemplate carries the default CR")

	lifecycleManager := func() {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(kyma.GroupVersionKind())
		require.NoError(t, kc.Get(ctx, client.ObjectKeyFromObject(kyma), got))
		modules, _, _ := unstructured.NestedSlice(got.Object, "spec", "modules")
		assert.Equal(t, []any{
			map[string]any{"name": "keda"},
			map[string]any{"name": "serverless", "channel": channel, "customResourcePolicy": "CreateAndDelete"},
		}, modules, "the page's patch sets the channel of the module's entry only")

		for _, o := range r.installed {
			o = o.DeepCopy()
			l := o.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			for k, v := range kymaManaged {
				l[k] = v
			}
			o.SetLabels(l)
			if namespaced, err := kc.IsObjectNamespaced(o); err == nil && namespaced && o.GetNamespace() == "" {
				o.SetNamespace(ns)
			}
			require.NoError(t, kc.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("lifecycle-manager-stand-in"), client.ForceOwnership),
				"applying %s %s", o.GetKind(), o.GetName())
		}
		r.deleteOldOperator(ctx, kc) // the new manifest has the CRD too
		cr := &unstructured.Unstructured{Object: defaultCR}
		err = kc.Create(ctx, cr.DeepCopy())
		require.True(t, apierrors.IsAlreadyExists(err), "the Serverless CR of 1.13 is there, so the default CR is not created: %v", err)
	}
	// The page's publishing step runs against the lifecycle manager's
	// CRDs: this cluster plays the control plane too.
	installLifecycleManagerCRDs(t, e.cluster)
	require.NoError(t, os.MkdirAll(filepath.Join(r.dir, "module-template"), 0o755))
	for _, name := range []string{"template.yaml", "module-release-meta.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, "module-template", name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(r.dir, "module-template", name), data, 0o644))
	}
	e.placeModule(framework.RealNode)

	r.run(map[string]func(){".status.modules": lifecycleManager})

	newFnEnv(t, e).waitReconciled(len(names))
	for _, name := range names {
		after, err := e.podsOf(ctx, fnNS, name)
		require.NoError(t, err)
		assert.Equal(t, before[name], after, "Function %s: same Deployment, generation, Pod template, ReplicaSets and Pods", name)
	}
	r.check()
}

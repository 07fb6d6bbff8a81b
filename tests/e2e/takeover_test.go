//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
	"github.com/kyma-project/serverless-manager/tests/support/upstreamtest"
)

// identity is the UID and, for Deployments, the generation of an object.
type identity struct {
	UID        types.UID
	Generation int64
}

// moduleIdentities reads the objects whose identity a takeover keeps.
func (e *env) moduleIdentities(ctx context.Context) map[string]identity {
	e.t.Helper()
	out := map[string]identity{}
	for _, o := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: controllerName}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: registryName}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: module.RegistryPVCName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: registrySecret}},
	} {
		require.NoError(e.t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: o.GetName()}, o))
		kind := "Secret"
		switch o.(type) {
		case *appsv1.Deployment:
			kind = "Deployment"
		case *corev1.PersistentVolumeClaim:
			kind = "PersistentVolumeClaim"
		}
		out[kind+"/"+o.GetName()] = identity{UID: o.GetUID()}
	}
	return out
}

// upstreamLabelled lists the objects of the module's kinds that still say
// serverless-operator manages them: namespaced ones in namespace (every
// namespace when it is empty) and cluster-scoped ones.
func (e *env) upstreamLabelled(ctx context.Context, namespace string) ([]string, error) {
	var out []string
	for _, k := range kinds.Managed() {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		opts := []client.ListOption{client.MatchingLabels{module.LabelManagedBy: upstreamtest.Manager}}
		if k.Namespaced && namespace != "" {
			opts = append(opts, client.InNamespace(namespace))
		}
		if err := e.c.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		for _, o := range list.Items {
			out = append(out, k.GVK.Kind+"/"+o.Namespace+"/"+o.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// serverless-operator 1.8.4 installed the module (fixtures: what it leaves
// in a cluster) and was stopped, as a module upgrade does; the manager
// starts and takes over: Ready, every Deployment and the PVC keep their UID,
// the registry keeps its credentials, nothing is labelled as
// serverless-operator's any more (the object only its chart rendered is
// gone), the CR carries the manager's finalizer only and the manifest cache
// Secret is removed.
func TestTakeoverOfServerlessOperator(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	inst := e.installUpstream(ctx)
	before := e.moduleIdentities(ctx)
	credsBefore := &corev1.Secret{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registrySecret}, credsBefore))

	f, fnNS, fnDeployment := e.functionBuiltBy184(inst)

	e.mgr = e.runManager("manager-"+t.Name(), e.publishedRuntimes())
	cr := e.waitFor("default", "the takeover to be Ready with the manager's finalizer only", 2*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation &&
			assert.ObjectsAreEqual([]string{module.Finalizer}, cr.Finalizers)
	})
	assert.Equal(t, "internal", cr.Status.DockerRegistry)
	assert.Equal(t, before, e.moduleIdentities(ctx), "Deployments, PVC and registry Secret taken over in place")
	creds := &corev1.Secret{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registrySecret}, creds))
	assert.Equal(t, credsBefore.Data["username"], creds.Data["username"], "registry credentials kept")
	assert.Equal(t, credsBefore.Data["password"], creds.Data["password"], "registry credentials kept")

	err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: upstreamtest.CacheSecret}, &corev1.Secret{})
	assert.True(t, apierrors.IsNotFound(err), "the manifest cache Secret is gone: %v", err)
	framework.WaitFor(t, 30*time.Second, "no object of the module labelled as serverless-operator's", func(ctx context.Context) (bool, string, error) {
		left, err := e.upstreamLabelled(ctx, ns)
		return len(left) == 0, "left: " + joinLines(left), err
	})
	err = e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: upstreamtest.OnlyUpstream}, &corev1.ConfigMap{})
	assert.True(t, apierrors.IsNotFound(err), "what only upstream's chart rendered is pruned: %v", err)

	d := &appsv1.Deployment{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registryName}, d))
	var containers []string
	for _, c := range d.Spec.Template.Spec.Containers {
		containers = append(containers, c.Name)
	}
	require.Equal(t, []string{"registry", "registry-agent"}, containers, "the registry runs the chart's containers only")
	assert.Equal(t, "data", d.Spec.Template.Spec.Volumes[0].Name)
	assert.Equal(t, module.RegistryPVCName, d.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName, "on the same claim")
	e.requireConsistent(ctx, cr)

	// The module's controller, the taken-over Deployment's new Pod, adopts
	// the Function: no new build, no rollout.
	f.controllerPod()
	f.waitFunction(fnNS, builtBy184, "to be Running under the module's controller", time.Minute, func(fn *v1alpha2.Function) bool {
		return isRunning(fn) && fn.Status.BuiltImage != ""
	})
	time.Sleep(3 * time.Second) // a rebuild or rollout would have started by now
	assert.Equal(t, 1, f.jobs.count(fnNS, builtBy184), "no new build Job: %v", f.jobs.names(fnNS, builtBy184))
	after := f.deployment(fnNS, builtBy184)
	assert.Equal(t, fnDeployment.UID, after.UID, "the Function's Deployment is kept")
	assert.Equal(t, fnDeployment.Generation, after.Generation, "the Function's Deployment is not rolled")
	assert.Equal(t, fnDeployment.Spec.Template, after.Spec.Template, "the Function's Pod template is unchanged")
	// The copies 1.8.4's controller made in the Function's namespace carried
	// the base objects' labels; the module's controller brings them in line.
	framework.WaitFor(t, 30*time.Second, "no object anywhere labelled as serverless-operator's", func(ctx context.Context) (bool, string, error) {
		left, err := e.upstreamLabelled(ctx, "")
		return len(left) == 0, "left: " + joinLines(left), err
	})
}

// builtBy184 is the Function of functionBuiltBy184.
const builtBy184 = "old"

// functionBuiltBy184 adds to 1.8.4's installation a Function that 1.8.4's
// controller built and runs: Function builtBy184 in the namespace fnNS, its
// Deployment d and one build Job. The module's own controller plays 1.8.4's,
// run with upstream's Deployment configuration (the same APP_* settings: it
// is a drop-in for 1.8.4's); its build and its Pods are simulated
// (upstream's registry is). The stand-in is gone when it returns, as
// upstream's controller goes with its operator; the module's Pods go to the
// real node from now on (the Pods of the Deployments a takeover updates).
func (e *env) functionBuiltBy184(inst *upstreamtest.Installation) (f *fnEnv, fnNS string, d *appsv1.Deployment) {
	t, ctx := e.t, e.t.Context()
	t.Helper()
	fnNS = "takeover-functions"
	e.waitNamespaceGoneIfDeleted(fnNS)
	require.NoError(t, e.cluster.PlacePods(ctx, fnNS, framework.Simulated))
	t.Cleanup(func() { _ = e.cluster.DeleteNamespace(context.Background(), fnNS) })
	e.placeModule(framework.RealNode)
	f, stopStandIn := e.standInFunctionController(inst)
	require.NoError(t, f.fcs.Create(ctx, inline(fnNS, builtBy184, v1alpha2.RuntimePython312, "built by 1.8.4")))
	f.waitRunning(fnNS, builtBy184)
	d = f.deployment(fnNS, builtBy184)
	require.Equal(t, 1, f.jobs.count(fnNS, builtBy184))
	stopStandIn()
	return f, fnNS, d
}

// installUpstream installs what serverless-operator 1.8.4 leaves in a
// cluster (fixtures) after stopping the manager, as a module upgrade finds
// it, and waits until it is up.
func (e *env) installUpstream(ctx context.Context) *upstreamtest.Installation {
	e.t.Helper()
	require.NoError(e.t, e.mgr.Stop(), "upstream's operator owns the cluster until the upgrade")
	return e.installUpstreamFixtures(ctx)
}

// installUpstreamFixtures installs what serverless-operator 1.8.4 leaves in
// a cluster (fixtures; the Serverless CRD must be there) and waits until it
// is up.
func (e *env) installUpstreamFixtures(ctx context.Context) *upstreamtest.Installation {
	t := e.t
	t.Helper()
	inst, err := upstreamtest.Load(e.cluster.Root())
	require.NoError(t, err)
	require.NoError(t, inst.Install(ctx, e.c))
	framework.WaitFor(t, time.Minute, "upstream's installation to be up (Deployments available, PVC bound)", func(ctx context.Context) (bool, string, error) {
		for _, name := range []string{controllerName, registryName} {
			d := &appsv1.Deployment{}
			if err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
				return false, "", err
			}
			if d.Status.AvailableReplicas < 1 {
				return false, name + " not available", nil
			}
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryPVCName}, pvc); err != nil {
			return false, "", err
		}
		return pvc.Status.Phase == corev1.ClaimBound, "PVC " + string(pvc.Status.Phase), nil
	})
	return inst
}

// standInFunctionController runs the Function controller with the
// configuration of upstream's Deployment serverless-ctrl-mngr (env and
// volumes): a copy of it with the module's image and binary and a
// ServiceAccount holding the controller's ClusterRole, standing in for
// 1.8.4's controller image, on the real node. stop removes it and waits
// until its Pod is gone.
func (e *env) standInFunctionController(inst *upstreamtest.Installation) (f *fnEnv, stop func()) {
	e.t.Helper()
	t, ctx := e.t, e.t.Context()
	const name = "takeover-stand-in"
	roles, err := manifest.ReadFile(filepath.Join(e.cluster.Root(), "charts", "serverless", "files", "function-controller-rbac", "role.yaml"))
	require.NoError(t, err)
	var rules []rbacv1.PolicyRule
	for _, r := range roles {
		if r.GetKind() != "ClusterRole" {
			continue
		}
		role := &rbacv1.ClusterRole{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(r.Object, role))
		rules = role.Rules
	}
	require.NotEmpty(t, rules, "the controller's generated ClusterRole")
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}},
	}
	d := inst.Object("Deployment", controllerName).DeepCopy()
	d.SetName(name)
	d.SetLabels(map[string]string{"app": name})
	spec := d.Object["spec"].(map[string]any)
	spec["replicas"] = int64(1)
	spec["selector"] = map[string]any{"matchLabels": map[string]any{"app": name}}
	tmpl := spec["template"].(map[string]any)
	tmpl["metadata"] = map[string]any{"labels": map[string]any{"app": name}}
	pod := tmpl["spec"].(map[string]any)
	pod["serviceAccountName"] = name
	ctr := pod["containers"].([]any)[0].(map[string]any)
	ctr["image"] = chartImage(t, e.cluster.Root(), "function_controller")
	ctr["command"] = []any{"/" + module.FunctionController().Binary}
	// 1.8.4's controller ignored the chart's minRequestCpu/minRequestMemory keys
	// (no minimums, docs/contributor/upstream-contract.md#resource-presets); the
	// module's rejects unknown keys.
	for _, v := range ctr["env"].([]any) {
		env := v.(map[string]any)
		if env["name"] == "APP_FUNCTION_RESOURCE_CONFIG" {
			var kept []string
			for _, line := range strings.Split(env["value"].(string), "\n") {
				if !strings.Contains(line, "minRequestCpu:") && !strings.Contains(line, "minRequestMemory:") {
					kept = append(kept, line)
				}
			}
			env["value"] = strings.Join(kept, "\n")
		}
	}
	objs = append(objs, d)
	for _, o := range objs {
		require.NoError(t, e.c.Create(ctx, o), "creating %s", o.GetName())
	}
	t.Cleanup(func() {
		for _, o := range objs {
			_ = e.c.Delete(context.Background(), o)
		}
	})

	f = fnClients(t, e)
	labels := map[string]string{"app": name}
	framework.WaitFor(t, 2*time.Minute, "the stand-in controller's Pod to be Ready", func(ctx context.Context) (bool, string, error) {
		_, err := e.cluster.ReadyPod(ctx, ns, labels)
		return err == nil, fmt.Sprint(err), nil
	}, framework.DumpPods(e.c, ns), e.cluster.DumpPodLogs(ns, labels, 30))
	return f, func() {
		require.NoError(t, e.c.Delete(ctx, d.DeepCopy()))
		framework.WaitFor(t, time.Minute, "the stand-in controller's Pods to be gone", func(ctx context.Context) (bool, string, error) {
			var pods corev1.PodList
			err := e.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels))
			return len(pods.Items) == 0, fmt.Sprintf("%d Pods", len(pods.Items)), err
		})
	}
}

// publishedRuntimes is the manager's environment that takes the local
// runtime (and buildless init) images out of its chart values again: the
// Functions of a taken-over installation run the published ones, and a
// changed runtime image would rebuild or roll them. The module's own Pods
// still get the local registry images.
func (e *env) publishedRuntimes() []string {
	var env []string
	for _, kv := range e.cluster.LocalImageEnv() {
		key, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(key, "IMAGE_FUNCTION_") {
			env = append(env, key+"=")
		}
	}
	return env
}

// chartImage is the reference the chart's values give the image key (the
// module's own images: the local node pulls them under these names).
func chartImage(t *testing.T, root, key string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "charts", "serverless", "values.yaml"))
	require.NoError(t, err)
	var values struct {
		Global struct {
			ImageRegistry string `json:"imageRegistry"`
			Images        map[string]struct {
				Repository string `json:"repository"`
				Tag        string `json:"tag"`
			} `json:"images"`
		} `json:"global"`
	}
	require.NoError(t, yaml.Unmarshal(data, &values))
	img, ok := values.Global.Images[key]
	require.True(t, ok, "image key %s in the chart's values", key)
	return values.Global.ImageRegistry + "/" + img.Repository + ":" + img.Tag
}

func joinLines(s []string) string {
	out := ""
	for _, x := range s {
		out += "\n  " + x
	}
	return out
}

// waitNamespaceGoneIfDeleted waits until the namespace name, if an earlier
// test left it being deleted, is gone: the fixtures' namespaces have fixed
// names, and a test's uninstall no longer waits for its namespace (its
// Functions are deleted first), so the next test can find it terminating,
// where nothing can be created.
func (e *env) waitNamespaceGoneIfDeleted(name string) {
	e.t.Helper()
	framework.WaitFor(e.t, 2*time.Minute, "namespace "+name+" of an earlier test to be gone", func(ctx context.Context) (bool, string, error) {
		n := &corev1.Namespace{}
		err := e.c.Get(ctx, types.NamespacedName{Name: name}, n)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return n.DeletionTimestamp == nil, fmt.Sprintf("phase %s, deletion requested at %v", n.Status.Phase, n.DeletionTimestamp), nil
	}, framework.DumpPods(e.c, name))
}

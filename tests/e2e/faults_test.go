//go:build e2e

package e2e

// Fault tests: the manager is killed, its objects are deleted or edited, its
// CR is edited concurrently, and it is asked to uninstall while Functions
// exist. Every scenario must end Ready (or uninstalled) with exactly the
// objects of the inventory and nothing else.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// labelledIDs lists every object carrying the module labels, as inventory IDs.
func (e *env) labelledIDs(ctx context.Context) []string {
	e.t.Helper()
	var ids []string
	for _, k := range kinds.Managed() {
		gvk := k.GVK
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		require.NoError(e.t, e.c.List(ctx, list, client.MatchingLabels{module.LabelManagedBy: module.ManagedBy}))
		for _, o := range list.Items {
			if o.DeletionTimestamp != nil {
				continue
			}
			ids = append(ids, strings.Join([]string{gvk.Group, gvk.Kind, o.Namespace, o.Name}, "/"))
		}
	}
	sort.Strings(ids)
	return ids
}

// requireConsistent checks that the cluster holds exactly the inventory of
// cr, read afresh at every look: an object pruned just now leaves the
// inventory one reconcile later, once its deletion is confirmed. Objects
// in other namespaces are the Function controller's copies, not the
// manager's.
func (e *env) requireConsistent(ctx context.Context, cr *v1alpha1.Serverless) {
	e.t.Helper()
	framework.WaitFor(e.t, 20*time.Second, "the cluster to hold exactly the inventory", func(ctx context.Context) (bool, string, error) {
		current := &v1alpha1.Serverless{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(cr), current); err != nil {
			return false, "", err
		}
		var inv []string
		for _, entry := range current.Status.Inventory {
			inv = append(inv, entry.ID)
		}
		sort.Strings(inv)
		var got []string
		for _, id := range e.labelledIDs(ctx) {
			if parts := strings.Split(id, "/"); parts[2] == "" || parts[2] == cr.Namespace {
				got = append(got, id)
			}
		}
		return assert.ObjectsAreEqual(inv, got), fmt.Sprintf("inventory %d objects, labelled %d: %v", len(inv), len(got), diff(inv, got)), nil
	})
}

func diff(a, b []string) string {
	in := func(s []string, x string) bool {
		for _, y := range s {
			if x == y {
				return true
			}
		}
		return false
	}
	var out []string
	for _, x := range a {
		if !in(b, x) {
			out = append(out, "-"+x)
		}
	}
	for _, x := range b {
		if !in(a, x) {
			out = append(out, "+"+x)
		}
	}
	return strings.Join(out, " ")
}

func TestKillManagerDuringInstall(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	const runs = 10
	for run := range runs {
		e.applySample("default-serverless-cr.yaml")
		// Kill at a random point of the install (it takes about a second).
		delay := time.Duration(rand.IntN(1500)) * time.Millisecond
		time.Sleep(delay)
		require.NoError(t, e.mgr.Kill9(), "run %d", run)
		require.NoError(t, e.mgr.Restart(), "run %d", run)
		cr := e.waitState("default", v1alpha1.StateReady)
		e.requireConsistent(ctx, cr)
		t.Logf("run %d: killed after %s, Ready again", run, delay)

		require.NoError(t, e.c.Delete(ctx, cr))
		framework.WaitFor(t, 2*time.Minute, "the uninstall", func(ctx context.Context) (bool, string, error) {
			err := e.c.Get(ctx, client.ObjectKeyFromObject(cr), &v1alpha1.Serverless{})
			return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
		}, e.dumps("default")...)
		assert.Empty(t, e.labelledIDs(ctx), "run %d: leftovers after uninstall", run)
	}
}

func TestManagedObjectsAreRestored(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	e.applySample("default-serverless-cr.yaml")
	cr := e.waitState("default", v1alpha1.StateReady)

	faults := []struct {
		name   string
		inject func() error
		check  func(ctx context.Context) (bool, string, error)
		// restore bounds the wait for check (default 30s).
		restore time.Duration
	}{
		{
			name: "Deployment deleted",
			inject: func() error {
				return e.c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controllerName}})
			},
			check: func(ctx context.Context) (bool, string, error) {
				d := &appsv1.Deployment{}
				err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllerName}, d)
				return err == nil && d.DeletionTimestamp == nil, "", client.IgnoreNotFound(err)
			},
		},
		{
			name: "Deployment scaled to zero",
			inject: func() error {
				d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controllerName}}
				return e.edit(d, func() { d.Spec.Replicas = ptr.To[int32](0) })
			},
			check: func(ctx context.Context) (bool, string, error) {
				d := &appsv1.Deployment{}
				err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllerName}, d)
				return err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 1, "", err
			},
		},
		{
			name: "log ConfigMap edited",
			inject: func() error {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: logConfigMap}}
				return e.edit(cm, func() { cm.Data["log-config.yaml"] = "logLevel: fatal\nlogFormat: text\n" })
			},
			check: func(ctx context.Context) (bool, string, error) {
				cm := &corev1.ConfigMap{}
				err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: logConfigMap}, cm)
				return err == nil && !strings.Contains(cm.Data["log-config.yaml"], "fatal"), cm.Data["log-config.yaml"], err
			},
		},
		{
			name: "registry Secret deleted",
			inject: func() error {
				return e.c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: registrySecret}})
			},
			check: func(ctx context.Context) (bool, string, error) {
				s := &corev1.Secret{}
				err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registrySecret}, s)
				return err == nil && s.DeletionTimestamp == nil && len(s.Data["username"]) > 0, "", client.IgnoreNotFound(err)
			},
		},
		{
			name: "Function CRD deleted",
			inject: func() error {
				return e.c.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "functions.serverless.kyma-project.io"}})
			},
			// Restored means serving: established and its Functions
			// listable (see the wait before each fault).
			check: func(ctx context.Context) (bool, string, error) {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				err := e.c.Get(ctx, types.NamespacedName{Name: "functions.serverless.kyma-project.io"}, crd)
				if apierrors.IsNotFound(err) {
					return false, "no CRD", nil
				}
				if err != nil {
					return false, "", err // the last observation stays the last CRD seen
				}
				if crd.DeletionTimestamp != nil || !crdEstablished(crd) {
					return false, crdState(crd), nil
				}
				fns := &metav1.PartialObjectMetadataList{}
				fns.SetGroupVersionKind(v1alpha2.GroupVersion.WithKind("FunctionList"))
				if err := e.c.List(ctx, fns); err != nil {
					return false, crdState(crd) + ", listing Functions: " + err.Error(), nil
				}
				return true, crdState(crd), nil
			},
			// The manager creates the CRD again once kube-apiserver's CRD
			// finalizer has let the old one go (it never stops a deletion).
			restore: 2 * time.Minute,
		},
	}
	for _, f := range faults {
		for run := range 2 {
			// The fault hits a module in place. For the CRD that includes
			// its Functions' storage, which kube-apiserver sets up at the
			// first request for them (in a cluster, the Function
			// controller's watch): a CRD deleted before any such request
			// was seen Terminating for over 2 minutes, its finalizer unable
			// to list the instances ("storage is (re)initializing").
			framework.WaitFor(t, 30*time.Second, f.name+": in place before the fault", f.check, e.dumps("default")...)
			start := time.Now()
			require.NoError(t, f.inject(), "%s (run %d)", f.name, run)
			restore := 30 * time.Second
			if f.restore > 0 {
				restore = f.restore
			}
			framework.WaitFor(t, restore, f.name+": restored", f.check, e.dumps("default")...)
			cr = e.waitState("default", v1alpha1.StateReady)
			t.Logf("%s (run %d): restored and Ready after %s", f.name, run, time.Since(start).Round(time.Millisecond))
		}
	}
	e.requireConsistent(ctx, cr)
}

// crdState says whether a CRD is being deleted and how its deletion goes.
func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func crdState(crd *apiextensionsv1.CustomResourceDefinition) string {
	if crd.DeletionTimestamp == nil {
		return fmt.Sprintf("present, uid %s, established %t", crd.UID, crdEstablished(crd))
	}
	state := fmt.Sprintf("Terminating since %s, finalizers %v", crd.DeletionTimestamp.Format(time.TimeOnly), crd.Finalizers)
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Terminating {
			state += fmt.Sprintf(", %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	return state
}

func TestConcurrentEditsOfTheCR(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	e.applySample("default-serverless-cr.yaml")
	e.waitState("default", v1alpha1.StateReady)

	levels := []string{"debug", "info", "warn", "error"}
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				level := levels[(w+i)%len(levels)]
				_ = framework.Poll(ctx, 10*time.Second, "an edit", func(ctx context.Context) (bool, string, error) {
					cr := &v1alpha1.Serverless{}
					if err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "default"}, cr); err != nil {
						return false, "", err
					}
					cr.Spec.LogLevel = level
					err := e.c.Update(ctx, cr)
					return err == nil, "", err
				})
			}
		}()
	}
	wg.Wait()
	final := e.get("default").Spec.LogLevel
	cr := e.waitFor("default", "the last edit to be in effect", time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation && cr.Status.LogLevel == final
	})
	cm := &corev1.ConfigMap{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: logConfigMap}, cm))
	assert.Contains(t, cm.Data["log-config.yaml"], final)
	e.requireConsistent(ctx, cr)
}

func TestUninstallWaitsForFunctions(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	e.applySample("default-serverless-cr.yaml")
	cr := e.waitState("default", v1alpha1.StateReady)

	userNS := e.cluster.Namespace(t, "e2e-functions")
	fn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serverless.kyma-project.io/v1alpha2", "kind": "Function",
		"metadata": map[string]any{"namespace": userNS, "name": "hello"},
		"spec": map[string]any{"runtime": "nodejs22", "source": map[string]any{"inline": map[string]any{
			"source": "module.exports = { main: function (event, context) { return 'hello' } }"}}},
	}}
	require.NoError(t, e.c.Create(ctx, fn))
	userSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: "user-data"}, StringData: map[string]string{"k": "v"}}
	require.NoError(t, e.c.Create(ctx, userSecret))

	require.NoError(t, e.c.Delete(ctx, cr))
	want := fmt.Sprintf("1 Functions still exist (%s/hello); delete them to uninstall", userNS)
	e.waitFor("default", "the uninstall to be held back", 30*time.Second, func(cr *v1alpha1.Serverless) bool {
		for _, c := range cr.Status.Conditions {
			if c.Type == v1alpha1.ConditionDeleted && c.Message == v1alpha1.ReasonFunctionsExist+": "+want {
				return cr.Status.State == v1alpha1.StateWarning
			}
		}
		return false
	})
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllerName}, &appsv1.Deployment{}), "nothing is removed while Functions exist")

	start := time.Now()
	require.NoError(t, e.c.Delete(ctx, fn))
	framework.WaitFor(t, 2*time.Minute, "the uninstall to complete", func(ctx context.Context) (bool, string, error) {
		err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "default"}, &v1alpha1.Serverless{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	}, e.dumps("default")...)
	t.Logf("uninstalled %s after the last Function was deleted", time.Since(start).Round(time.Millisecond))
	assert.Empty(t, e.labelledIDs(ctx))
	require.NoError(t, e.c.Get(ctx, client.ObjectKeyFromObject(userSecret), &corev1.Secret{}), "user Secrets are never deleted")
}

func TestLeaderElectionLetsOneReplicaWrite(t *testing.T) {
	e := startManager(t) // replica 1, started without leader election: stop it
	require.NoError(t, e.mgr.Stop())

	var replicas []*framework.Process
	for i := range 2 {
		replicas = append(replicas, e.runManager(fmt.Sprintf("manager-%s-%d", t.Name(), i), nil, "--leader-elect=true"))
	}
	e.mgr = replicas[0]
	e.applySample("default-serverless-cr.yaml")
	e.waitState("default", v1alpha1.StateReady)

	leaders := 0
	for _, p := range replicas {
		if p.LogHas("Successfully acquired lease") {
			leaders++
		}
	}
	assert.Equal(t, 1, leaders, "exactly one replica leads")

	// The leader goes away; the other one takes over and keeps the module in shape.
	var leader, follower *framework.Process
	if replicas[0].LogHas("Successfully acquired lease") {
		leader, follower = replicas[0], replicas[1]
	} else {
		leader, follower = replicas[1], replicas[0]
	}
	require.NoError(t, leader.Stop())
	e.mgr = follower
	framework.WaitFor(t, time.Minute, "the other replica to lead", func(context.Context) (bool, string, error) {
		return follower.LogHas("Successfully acquired lease"), "", nil
	}, framework.DumpLog(follower, 20))
	e.update("default", func(cr *v1alpha1.Serverless) { cr.Spec.LogLevel = "error" })
	e.waitFor("default", "the new leader to act", time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.LogLevel == "error"
	})
}

func TestAPIServerRestartDuringInstall(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	for run := range 2 {
		e.applySample("default-serverless-cr.yaml")
		time.Sleep(time.Duration(200+rand.IntN(600)) * time.Millisecond)
		start := time.Now()
		require.NoError(t, e.cluster.RestartAPIServer(ctx), "run %d", run)
		// Longer than other waits: after the restart the cluster's own
		// clients (scheduler, kwok handing volumes back) recover with
		// backoff, and the registry Pod waits for its volume; 16 restarts
		// in a row took from 5s to 1m54s to Ready.
		cr := e.waitFor("default", "Serverless default to be Ready after the restart", 3*time.Minute, func(cr *v1alpha1.Serverless) bool {
			return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation
		})
		e.requireConsistent(ctx, cr)
		t.Logf("run %d: Ready %s after the API server restart began", run, time.Since(start).Round(time.Millisecond))
		require.NoError(t, e.c.Delete(ctx, cr))
		framework.WaitFor(t, 2*time.Minute, "the uninstall", func(ctx context.Context) (bool, string, error) {
			err := e.c.Get(ctx, client.ObjectKeyFromObject(cr), &v1alpha1.Serverless{})
			return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
		}, e.dumps("default")...)
	}
}

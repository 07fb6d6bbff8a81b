//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// revision is the Deployment's rollout count (kube-controller-manager's
// deployment.kubernetes.io/revision) with its UID: one more revision is
// one rollout of the same Deployment.
type revision struct {
	UID      types.UID
	Revision int
}

func (f *fnEnv) revision(ns, name string) revision {
	f.t.Helper()
	d := f.deployment(ns, name)
	n, _ := strconv.Atoi(d.Annotations["deployment.kubernetes.io/revision"])
	return revision{UID: d.UID, Revision: n}
}

// switchMode sets spec.functionMode, waits for the CR to be Ready in that
// mode, and runs the Function controller as its Deployment now configures
// it (the new Pod a real cluster would start).
func (f *fnEnv) switchMode(mode string, change func(cr *v1alpha1.Serverless)) *fnEnv {
	f.t.Helper()
	f.update("default", func(cr *v1alpha1.Serverless) {
		cr.Spec.FunctionMode = mode
		if change != nil {
			change(cr)
		}
	})
	f.waitFor("default", "Ready in "+mode+" mode", 2*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation && cr.Status.FunctionMode == mode
	})
	f.controllerPod()
	return f
}

// Switching a live cluster between build and buildless mode rolls each
// Function exactly once, the old Pods serving until the new ones are
// ready; the internal registry stays until the CR turns it off.
func TestSwitchFunctionMode(t *testing.T) {
	f := startFunctionController(t)
	ctx := t.Context()
	fnNS := "switch-mode"
	require.NoError(t, f.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fnNS}}))
	t.Cleanup(func() {
		_ = f.c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fnNS}})
	})
	names := []string{"node", "py"}
	require.NoError(t, f.fcs.Create(ctx, inline(fnNS, "node", v1alpha2.RuntimeNodejs22, "built")))
	require.NoError(t, f.fcs.Create(ctx, inline(fnNS, "py", v1alpha2.RuntimePython312, "built")))
	built := map[string]revision{}
	for _, name := range names {
		f.waitRunning(fnNS, name)
		built[name] = f.revision(fnNS, name)
	}

	copies := f.baseCopies() // what build mode copies into fnNS
	framework.WaitFor(t, 30*time.Second, "the copies of build mode in "+fnNS, func(ctx context.Context) (bool, string, error) {
		_, missing, err := f.copiesIn(ctx, fnNS, copies)
		return len(missing) == 0, fmt.Sprintf("missing: %v", missing), err
	})

	// build → buildless: one rollout each, to the runtime image.
	f = f.switchMode(v1alpha1.FunctionModeBuildless, nil)
	serving := f.watchAvailable(fnNS, names)
	for _, name := range names {
		fn := f.waitFunction(fnNS, name, "to run buildless", 2*time.Minute, isRunningBuildless)
		d := f.deployment(fnNS, name)
		assert.Equal(t, fn.Status.RuntimeImage, d.Spec.Template.Spec.Containers[0].Image, "%s runs the runtime image", name)
		assert.Equal(t, revision{UID: built[name].UID, Revision: built[name].Revision + 1}, f.revision(fnNS, name), "%s rolled once, in place", name)
		jobs, _, _, configMaps, err := f.children(ctx, fnNS, name)
		require.NoError(t, err)
		assert.Empty(t, jobs, "%s: build Jobs are gone", name)
		assert.Empty(t, configMaps, "%s: source ConfigMaps are gone", name)
	}
	serving.requireAlwaysServed()
	framework.WaitFor(t, 30*time.Second, "the copies of build mode to leave "+fnNS, func(ctx context.Context) (bool, string, error) {
		present, _, err := f.copiesIn(ctx, fnNS, copies)
		return len(present) == 0, fmt.Sprintf("present: %v", present), err
	})
	require.NoError(t, f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryServiceName}, &corev1.Service{}),
		"the internal registry stays until the CR turns it off")

	// Turning the registry off touches no Function.
	buildless := map[string]revision{}
	for _, name := range names {
		buildless[name] = f.revision(fnNS, name)
	}
	f = f.switchMode(v1alpha1.FunctionModeBuildless, func(cr *v1alpha1.Serverless) {
		cr.Spec.DockerRegistry = &v1alpha1.DockerRegistry{EnableInternal: ptr.To(false)}
	})
	framework.WaitFor(t, time.Minute, "the internal registry to go", func(ctx context.Context) (bool, string, error) {
		err := f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "serverless-docker-registry"}, &appsv1.Deployment{})
		return apierrors.IsNotFound(err), "still there", client404(err)
	})
	f.waitReconciled(len(names))
	for _, name := range names {
		assert.Equal(t, buildless[name], f.revision(fnNS, name), "%s is not rolled by the registry's removal", name)
	}

	// buildless → build: one build and one rollout each.
	f = f.switchMode(v1alpha1.FunctionModeBuild, func(cr *v1alpha1.Serverless) {
		cr.Spec.DockerRegistry = &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}
	})
	serving = f.watchAvailable(fnNS, names)
	for _, name := range names {
		fn := f.waitRunning(fnNS, name)
		d := f.deployment(fnNS, name)
		assert.NotEqual(t, fn.Status.RuntimeImage, d.Spec.Template.Spec.Containers[0].Image, "%s runs its built image", name)
		assert.Equal(t, revision{UID: built[name].UID, Revision: buildless[name].Revision + 1}, f.revision(fnNS, name), "%s rolled once, in place", name)
	}
	serving.requireAlwaysServed()
}

// client404 is err unless the object is just not there.
func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// servedLog records, by polling, whether each Function's Deployment ever
// had no available replica.
type servedLog struct {
	t      *testing.T
	stop   context.CancelFunc
	done   chan struct{}
	outage []string
}

// watchAvailable polls the Functions' Deployments (one list per round)
// until requireAlwaysServed.
func (f *fnEnv) watchAvailable(fnNS string, names []string) *servedLog {
	ctx, cancel := context.WithCancel(f.t.Context())
	l := &servedLog{t: f.t, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for ctx.Err() == nil {
			var ds appsv1.DeploymentList
			sel := client.MatchingLabels{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}
			if err := f.c.List(ctx, &ds, client.InNamespace(fnNS), sel); err == nil {
				for _, d := range ds.Items {
					name := d.Labels[v1alpha2.LabelFunctionName]
					if slices.Contains(names, name) && d.Status.AvailableReplicas < 1 {
						l.outage = append(l.outage, fmt.Sprintf("%s at %s: %d available", name, time.Now().Format(time.TimeOnly), d.Status.AvailableReplicas))
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return l
}

func (l *servedLog) requireAlwaysServed() {
	l.t.Helper()
	l.stop()
	<-l.done
	assert.Empty(l.t, l.outage, "old Pods serve until the new ones are ready")
}

package reconciler

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/apply"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// Fakes of the reconciler's consumer-side interfaces.

type fakeRenderer struct {
	objs  []*unstructured.Unstructured
	err   error
	calls int
}

func (f *fakeRenderer) Render(string, map[string]any) ([]*unstructured.Unstructured, error) {
	f.calls++
	return f.objs, f.err
}
func (f *fakeRenderer) ChartVersion() string { return "1.2.3" }

type fakeApplier struct {
	res apply.Result
	err error
}

func (f *fakeApplier) Apply(context.Context, string, []*unstructured.Unstructured, inventory.Inventory, apply.Pins) (apply.Result, error) {
	return f.res, f.err
}

// fakeLive holds live objects by "Kind/name".
type fakeLive map[string]*unstructured.Unstructured

func (f fakeLive) Object(_ context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) (*unstructured.Unstructured, error) {
	return f[gvk.Kind+"/"+key.Name], nil
}
func (f fakeLive) LiveMeta(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) (metav1.Object, error) {
	if o, _ := f.Object(ctx, gvk, key); o != nil {
		return o, nil
	}
	return nil, nil
}
func (f fakeLive) NodeCount(context.Context) (int, error)                      { return 3, nil }
func (f fakeLive) ListManaged(context.Context) ([]metav1.Object, error)        { return nil, nil }
func (f fakeLive) ListManagedFromAPI(context.Context) ([]metav1.Object, error) { return nil, nil }

func newTestReconciler(live Live, renderer Renderer, applier Applier) (*Reconciler, *countEvents) {
	events := &countEvents{}
	return New(nil, nil, live, renderer, applier, events, nil, Options{Namespace: "kyma-system"}), events
}

// runStep runs one step as a reconcile's first: goOn says whether the run
// went on past it, res and err are what the run returns.
func runStep(ctx context.Context, s *state, run func(context.Context, *state) (steps.Outcome, error)) (goOn bool, res ctrl.Result, err error) {
	probe := func(context.Context, *state) (steps.Outcome, error) { goOn = true; return steps.Next(), nil }
	res, err = steps.Run(ctx, s, []step{{Name: "under-test", Run: run}, {Name: "probe", Run: probe}}, nil)
	return goOn, res, err
}

func newTestState(generation int64) *state {
	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "default", Generation: generation}}
	return &state{cr: cr, before: cr.Status.DeepCopy(), log: log.FromContext(context.Background())}
}

// deployment is a Deployment as the API server reports it: rolled out when
// observed equals generation and the replica is available.
func deployment(name string, generation, observed int64, available bool, progressing string) *unstructured.Unstructured {
	avail, availStatus := int64(0), "False"
	if available {
		avail, availStatus = 1, "True"
	}
	conditions := []any{map[string]any{"type": "Available", "status": availStatus}}
	if progressing != "" {
		status := "True"
		if progressing == "ProgressDeadlineExceeded" {
			status = "False"
		}
		conditions = append(conditions, map[string]any{"type": "Progressing", "status": status, "reason": progressing})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": "kyma-system", "generation": generation},
		"spec":     map[string]any{"replicas": int64(1)},
		"status": map[string]any{"observedGeneration": observed, "replicas": int64(1), "updatedReplicas": int64(1),
			"readyReplicas": avail, "availableReplicas": avail, "conditions": conditions},
	}}
}

func crd(name string, namesAcceptedAgo time.Duration) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name, "generation": int64(1)},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
			"lastTransitionTime": time.Now().Add(-namesAcceptedAgo).UTC().Format(time.RFC3339)}}},
	}}
}

func TestStepVerify(t *testing.T) {
	ready := deployment("ctrl", 2, 2, true, "NewReplicaSetAvailable")
	tests := []struct {
		name     string
		live     *unstructured.Unstructured
		warnings []string
		// installingSince is when the rollout began (the Installed
		// condition's transition); zero: just now.
		installingSince time.Duration
		wantState       v1alpha1.State
		wantReason      string
		wantMessage     string
		wantRequeue     func(time.Duration) bool
	}{
		{name: "rolled out", live: ready, wantState: v1alpha1.StateReady, wantReason: v1alpha1.ReasonInstalled,
			wantMessage: "Serverless 1.2.3 is installed and ready"},
		{name: "rolled out with a configuration warning", live: ready, warnings: []string{"both registries set"},
			wantState: v1alpha1.StateWarning, wantReason: v1alpha1.ReasonInstalled, wantMessage: "with warnings: both registries set"},
		{name: "controller has not seen the new generation", live: deployment("ctrl", 2, 1, true, "NewReplicaSetAvailable"),
			wantState: v1alpha1.StateProcessing, wantReason: v1alpha1.ReasonInstalling, wantMessage: "waiting for Deployment kyma-system/ctrl",
			wantRequeue: func(d time.Duration) bool { return d > 4*time.Minute && d <= 5*time.Minute }},
		{name: "not available after the rollout deadline", live: deployment("ctrl", 2, 2, false, "ReplicaSetUpdated"), installingSince: 6 * time.Minute,
			wantState: v1alpha1.StateError, wantReason: v1alpha1.ReasonRolloutFailed, wantMessage: "not ready 5m0s after the last change"},
		{name: "progress deadline exceeded", live: deployment("ctrl", 2, 2, false, "ProgressDeadlineExceeded"),
			wantState: v1alpha1.StateError, wantReason: v1alpha1.ReasonRolloutFailed, wantMessage: "rollout failed: Deployment kyma-system/ctrl"},
		{name: "not in the cache yet", live: nil,
			wantState: v1alpha1.StateProcessing, wantReason: v1alpha1.ReasonInstalling, wantMessage: "waiting for Deployment kyma-system/ctrl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := fakeLive{}
			if tt.live != nil {
				live["Deployment/ctrl"] = tt.live
			}
			r, _ := newTestReconciler(live, &fakeRenderer{}, &fakeApplier{})
			s := newTestState(3)
			s.cr.Status.ChartVersion = "1.2.3"
			s.warnings = tt.warnings
			s.applied = []*unstructured.Unstructured{deployment("ctrl", 2, 0, false, "")}
			s.setCondition(v1alpha1.ConditionInstalled, metav1.ConditionFalse, v1alpha1.ReasonInstalling, "applying")
			meta.FindStatusCondition(s.cr.Status.Conditions, v1alpha1.ConditionInstalled).LastTransitionTime = metav1.NewTime(time.Now().Add(-tt.installingSince))

			_, res, _ := runStep(context.Background(), s, r.stepVerify)
			assert.Equal(t, tt.wantState, s.cr.Status.State)
			assert.Equal(t, int64(3), s.cr.Status.ObservedGeneration)
			c := meta.FindStatusCondition(s.cr.Status.Conditions, v1alpha1.ConditionInstalled)
			require.NotNil(t, c)
			assert.Equal(t, tt.wantReason, v1alpha1.Cause(*c))
			assert.Contains(t, c.Message, tt.wantMessage)
			if tt.wantRequeue != nil {
				assert.True(t, tt.wantRequeue(res.RequeueAfter), "requeue after %s", res.RequeueAfter)
			}
		})
	}
}

func TestStepVerifyLooksAgainForACRDWaitingToBeEstablished(t *testing.T) {
	live := fakeLive{"CustomResourceDefinition/functions.serverless.kyma-project.io": crd("functions.serverless.kyma-project.io", 4*time.Second)}
	r, _ := newTestReconciler(live, &fakeRenderer{}, &fakeApplier{})
	s := newTestState(1)
	s.applied = []*unstructured.Unstructured{crd("functions.serverless.kyma-project.io", 0)}
	_, res, _ := runStep(context.Background(), s, r.stepVerify)
	assert.Equal(t, v1alpha1.StateProcessing, s.cr.Status.State)
	// Names accepted 4s ago: the next look is when the 10s grace ends, not at the rollout deadline.
	assert.InDelta(t, (establishGrace - 4*time.Second).Seconds(), res.RequeueAfter.Seconds(), 1.5)
}

func TestStepApply(t *testing.T) {
	applied := []*unstructured.Unstructured{deployment("ctrl", 1, 0, false, "")}
	portTaken := apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, module.RegistryServiceName, field.ErrorList{
		field.Invalid(field.NewPath("spec", "ports").Index(0).Child("nodePort"), 32137, "provided port is already allocated")})
	tests := []struct {
		name        string
		res         apply.Result
		err         error
		nodePort    int32
		wantGoOn    bool
		wantState   v1alpha1.State
		wantRetry   bool
		wantRefused bool
	}{
		{name: "applied: verify next", res: apply.Result{Objects: applied, Applied: []string{"apps/Deployment/kyma-system/ctrl"}}, wantGoOn: true},
		{name: "waiting for a CRD to be served", res: apply.Result{Waiting: "waiting for the API of Function to be served"}, wantState: v1alpha1.StateProcessing},
		{name: "rejected object", err: errors.New(`applying Deployment "ctrl": invalid`), wantState: v1alpha1.StateError, wantRetry: true},
		{name: "registry NodePort taken meanwhile: another one next time", err: fmt.Errorf("applying Service: %w", portTaken), nodePort: 32137,
			wantState: v1alpha1.StateError, wantRetry: true, wantRefused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.res.Inventory = inventory.Inventory{"apps/Deployment/kyma-system/ctrl": {ID: "apps/Deployment/kyma-system/ctrl", Digest: "d1", Version: "g1"}}
			r, _ := newTestReconciler(fakeLive{}, &fakeRenderer{}, &fakeApplier{res: tt.res, err: tt.err})
			s := newTestState(1)
			s.nodePort = tt.nodePort
			goOn, _, err := runStep(context.Background(), s, r.stepApply)
			assert.Equal(t, tt.wantGoOn, goOn)
			assert.Equal(t, tt.wantState, s.cr.Status.State)
			assert.Equal(t, tt.wantRetry, err != nil, "an apply error is retried with backoff")
			assert.Equal(t, tt.wantRefused, r.refused()[32137])
			assert.Equal(t, tt.res.Inventory.Entries(), s.cr.Status.Inventory, "the inventory is recorded, also on failure")
			if tt.wantGoOn {
				assert.Equal(t, applied, s.applied)
			}
		})
	}
}

func TestStepRenderReusesTheLastRender(t *testing.T) {
	renderer := &fakeRenderer{objs: []*unstructured.Unstructured{deployment("ctrl", 0, 0, false, "")}}
	r, _ := newTestReconciler(fakeLive{}, renderer, &fakeApplier{})
	render := func(values map[string]any) *state {
		s := newTestState(1)
		s.values = values
		goOn, _, _ := runStep(context.Background(), s, r.stepRender)
		assert.True(t, goOn)
		return s
	}
	s := render(map[string]any{"logLevel": "info"})
	assert.Equal(t, renderer.objs, s.objs)
	assert.Equal(t, "1.2.3", s.cr.Status.ChartVersion)
	render(map[string]any{"logLevel": "info"})
	assert.Equal(t, 1, renderer.calls, "same values: the last render is reused")
	render(map[string]any{"logLevel": "debug"})
	assert.Equal(t, 2, renderer.calls, "other values: rendered again")

	renderer.err = errors.New("template: boom")
	s = newTestState(1)
	s.values = map[string]any{"logLevel": "warn"}
	goOn, _, err := runStep(context.Background(), s, r.stepRender)
	assert.False(t, goOn)
	assert.Equal(t, v1alpha1.StateError, s.cr.Status.State)
	c := meta.FindStatusCondition(s.cr.Status.Conditions, v1alpha1.ConditionInstalled)
	assert.Equal(t, v1alpha1.ReasonInstallationErr, c.Reason, "upstream's reason")
	assert.Equal(t, v1alpha1.ReasonRenderFailed, v1alpha1.Cause(*c))
	assert.NoError(t, err, "a chart that does not render is not retried with backoff")
}

func TestStepPaused(t *testing.T) {
	r, _ := newTestReconciler(fakeLive{}, &fakeRenderer{}, &fakeApplier{})
	s := newTestState(1)
	goOn, _, _ := runStep(context.Background(), s, r.stepPaused)
	assert.True(t, goOn)

	s.cr.Annotations = map[string]string{module.PauseAnnotation: module.PausedValue}
	goOn, _, _ = runStep(context.Background(), s, r.stepPaused)
	assert.False(t, goOn, "nothing is changed while paused")
	assert.Equal(t, v1alpha1.StateWarning, s.cr.Status.State)
	c := meta.FindStatusCondition(s.cr.Status.Conditions, v1alpha1.ConditionInstalled)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionUnknown, c.Status)
	assert.Equal(t, v1alpha1.ReasonPaused, c.Reason)
}

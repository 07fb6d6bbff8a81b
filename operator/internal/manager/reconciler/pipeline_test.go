package reconciler

import (
	"context"
	"errors"
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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

func TestStepsOrder(t *testing.T) {
	deleting := metav1.Now()
	tests := []struct {
		name string
		cr   *v1alpha1.Serverless
		want []string
	}{
		{name: "install", cr: &v1alpha1.Serverless{},
			want: []string{"served", "scope", "paused", "inventory", "finalizer", "upstream", "configure", "render", "takeover", "apply", "takeover-cleanup", "registry-usage", "verify"}},
		{name: "uninstall", cr: &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleting}},
			want: []string{"confirm", "served", "scope", "inventory", "functions-guard", "delete-inventory", "delete-api-leftovers", "delete-copies", "delete-leases", "leave-scope", "remove-finalizer"}},
	}
	r, _ := newTestReconciler(fakeLive{}, &fakeRenderer{}, &fakeApplier{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var names []string
			for _, st := range r.steps(tt.cr) {
				names = append(names, st.Name)
				assert.NotNil(t, st.Run, st.Name)
			}
			assert.Equal(t, tt.want, names)
		})
	}
}

// stepTimes records ObserveStep calls.
type stepTimes struct{ steps []string }

func (m *stepTimes) ObserveStep(step string, _ time.Duration)       { m.steps = append(m.steps, step) }
func (*stepTimes) ObserveRender(time.Duration)                      {}
func (*stepTimes) SetState(string, string, v1alpha1.State)          {}
func (*stepTimes) DeleteState(string, string)                       {}
func (*stepTimes) AddApplied(int)                                   {}
func (*stepTimes) AddPruned(int)                                    {}
func (*stepTimes) SetRegistryUsage(string, *v1alpha1.RegistryUsage) {}

func TestRunStopsAtTheFirstStepThatSaysSo(t *testing.T) {
	tests := []struct {
		name    string
		goOn    []bool
		wantRan []string
	}{
		{name: "all go on", goOn: []bool{true, true, true}, wantRan: []string{"a", "b", "c"}},
		{name: "the second stops", goOn: []bool{true, false, true}, wantRan: []string{"a", "b"}},
		{name: "the first stops", goOn: []bool{false, true, true}, wantRan: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			metrics := &stepTimes{}
			r := New(nil, nil, fakeLive{}, nil, nil, &countEvents{}, metrics, Options{})
			var ran []string
			var list []step
			for i, name := range []string{"a", "b", "c"} {
				list = append(list, step{Name: name, Run: func(context.Context, *state) (steps.Outcome, error) {
					ran = append(ran, name)
					if !tt.goOn[i] {
						return steps.Stop(), nil
					}
					return steps.Next(), nil
				}})
			}
			_, err := steps.Run(context.Background(), newTestState(1), list, r.observeStep)
			require.NoError(t, err)
			assert.Equal(t, tt.wantRan, ran)
			assert.Equal(t, tt.wantRan, metrics.steps, "each step that ran is timed under its name")
		})
	}
}

// brokenLive fails every read.
type brokenLive struct{ fakeLive }

var errRead = errors.New("connection refused")

func (brokenLive) Object(context.Context, schema.GroupVersionKind, types.NamespacedName) (*unstructured.Unstructured, error) {
	return nil, errRead
}
func (brokenLive) NodeCount(context.Context) (int, error) { return 0, errRead }

// Each failure has its own reason: a failed read of the cluster is not an
// invalid configuration, a failed finalizer patch is no failed apply.
func TestFailureReasons(t *testing.T) {
	refused := func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error { return errRead }
	forbidden := func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: "operator.kyma-project.io", Resource: "serverlesses"}, "default", errors.New("no"))
	}
	tests := []struct {
		name       string
		funcs      interceptor.Funcs
		live       Live // brokenLive{} when nil
		step       func(r *Reconciler) func(context.Context, *state) (steps.Outcome, error)
		prepare    func(s *state)
		wantCond   string
		wantReason string
	}{
		{name: "listing Serverless CRs fails", funcs: interceptor.Funcs{List: refused},
			step:     func(r *Reconciler) func(context.Context, *state) (steps.Outcome, error) { return r.stepServed },
			wantCond: v1alpha1.ConditionConfigured, wantReason: v1alpha1.ReasonClusterReadFailed},
		{name: "reading the node count fails",
			step:     func(r *Reconciler) func(context.Context, *state) (steps.Outcome, error) { return r.stepConfigure },
			wantCond: v1alpha1.ConditionConfigured, wantReason: v1alpha1.ReasonClusterReadFailed},
		{name: "reading the applied objects fails",
			step:     func(r *Reconciler) func(context.Context, *state) (steps.Outcome, error) { return r.stepVerify },
			prepare:  func(s *state) { s.applied = []*unstructured.Unstructured{deployment("ctrl", 1, 0, false, "")} },
			wantCond: v1alpha1.ConditionInstalled, wantReason: v1alpha1.ReasonClusterReadFailed},
		{name: "touching a CRD the API server does not establish is refused", funcs: interceptor.Funcs{Patch: forbidden},
			live: fakeLive{"CustomResourceDefinition/functions.serverless.kyma-project.io": crd("functions.serverless.kyma-project.io", time.Minute)},
			step: func(r *Reconciler) func(context.Context, *state) (steps.Outcome, error) { return r.stepVerify },
			prepare: func(s *state) {
				s.applied = []*unstructured.Unstructured{crd("functions.serverless.kyma-project.io", 0)}
			},
			wantCond: v1alpha1.ConditionInstalled, wantReason: v1alpha1.ReasonApplyFailed},
		{name: "adding the finalizer is refused", funcs: interceptor.Funcs{Patch: forbidden},
			step:     func(r *Reconciler) func(context.Context, *state) (steps.Outcome, error) { return r.stepFinalizer },
			wantCond: v1alpha1.ConditionInstalled, wantReason: v1alpha1.ReasonFinalizerFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState(1)
			scheme, err := watch.NewScheme()
			require.NoError(t, err)
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(s.cr.DeepCopy()).WithInterceptorFuncs(tt.funcs).Build()
			var live Live = brokenLive{}
			if tt.live != nil {
				live = tt.live
			}
			r := New(c, c, live, &fakeRenderer{}, &fakeApplier{}, &countEvents{}, nil, Options{Namespace: "kyma-system"})
			if tt.prepare != nil {
				tt.prepare(s)
			}
			goOn, _, err := runStep(context.Background(), s, tt.step(r))
			assert.False(t, goOn, "the run stops")
			assert.Equal(t, v1alpha1.StateError, s.cr.Status.State)
			assert.Error(t, err, "retried with backoff")
			cond := meta.FindStatusCondition(s.cr.Status.Conditions, tt.wantCond)
			require.NotNil(t, cond)
			assert.Equal(t, metav1.ConditionFalse, cond.Status)
			assert.Equal(t, tt.wantReason, v1alpha1.Cause(*cond))
		})
	}
}

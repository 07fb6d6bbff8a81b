// Package reconciler drives a Serverless CR to its desired state. A reconcile
// runs a list of named steps, one per file, written down in one place
// (steps.go): the install or, for a CR being deleted, the uninstall. Each
// step updates the run's status and says with its outcome how the run goes
// on (package steps runs, times and logs the list). The
// status is written once at the end, and only when it changed.
package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/apply"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
)

// Renderer renders the chart for a namespace and values.
type Renderer interface {
	Render(namespace string, values map[string]any) ([]*unstructured.Unstructured, error)
	ChartVersion() string
}

// Applier applies rendered objects (and prunes those that left the chart).
type Applier interface {
	Apply(ctx context.Context, namespace string, objs []*unstructured.Unstructured, prev inventory.Inventory, pins apply.Pins) (apply.Result, error)
}

// Live reads live objects, from the cache where the manager caches them.
type Live interface {
	LiveMeta(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) (metav1.Object, error)
	Object(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) (*unstructured.Unstructured, error)
	NodeCount(ctx context.Context) (int, error)
	// ListManaged lists the objects labelled as the module's.
	ListManaged(ctx context.Context) ([]metav1.Object, error)
	// ListManagedFromAPI does the same asking the API server, not the cache.
	ListManagedFromAPI(ctx context.Context) ([]metav1.Object, error)
}

// EventRecorder emits Kubernetes events about a Serverless CR.
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Metrics observes reconciles; nil-safe implementations may ignore calls.
type Metrics interface {
	ObserveStep(step string, d time.Duration)
	ObserveRender(d time.Duration)
	SetState(namespace, name string, state v1alpha1.State)
	// DeleteState drops the state series of a CR that is gone.
	DeleteState(namespace, name string)
	AddApplied(n int)
	AddPruned(n int)
	// SetRegistryUsage records the internal registry's figures (nil: none).
	SetRegistryUsage(namespace string, u *v1alpha1.RegistryUsage)
}

// RegistryUsage measures the internal registry of a namespace with the
// registry's credentials (its registry-agent sidecar).
type RegistryUsage func(ctx context.Context, namespace, username, password string) (registryagent.Usage, error)

// Options of a Reconciler.
type Options struct {
	// Namespace is the manager's own namespace (leader election, its
	// permissions). The module is installed into the served CR's namespace,
	// which may be any.
	Namespace string
	// Scope follows the served CR's namespace with the manager's namespaced
	// cache, watches and permissions (package scope). Nil: the client's
	// cache holds the namespaced objects already (tests).
	Scope Scope
	// ImageOverrides replace chart images, keyed like the chart's global.images.
	ImageOverrides map[string]string
	// FIPSMode is the manager's KYMA_FIPS_MODE_ENABLED (values.Facts.FIPSMode).
	FIPSMode bool
	// NewSecret returns a random alphanumeric string of length n.
	NewSecret func(n int) string
	// FunctionsRecheck is how often a blocked uninstall looks for Functions again.
	FunctionsRecheck time.Duration
	// DeletionRecheck is how often an uninstall checks that objects are gone.
	DeletionRecheck time.Duration
	// NodePortRange is the API server's --service-node-port-range the
	// registry's NodePort is picked from; zero means Kubernetes' default.
	NodePortRange values.NodePortRange
	// RolloutTimeout is how long objects may take to become ready after an
	// apply before the state turns to Error.
	RolloutTimeout time.Duration
	// RegistryUsage measures the internal registry; nil measures nothing.
	RegistryUsage RegistryUsage
	// RegistryUsageEvery is how often a Ready installation with the
	// internal registry is measured again.
	RegistryUsageEvery time.Duration
	// Named watches, by name, the users' objects the configuration reads
	// (watch.Named): the cache holds only the module's. Nil reads them from
	// the client's cache instead (tests whose fake holds every object).
	Named NamedWatches
}

// NamedWatches watches single objects by name and reports their changes.
type NamedWatches interface {
	// Use declares the objects owner's configuration reads; when it returns
	// they are watched and listed, and watches no owner uses stop.
	Use(ctx context.Context, owner string, keys ...watch.NamedKey) error
	// Get returns a watched object's metadata (watch.ErrNotWatched for
	// others).
	Get(key watch.NamedKey) (*metav1.PartialObjectMetadata, bool, error)
	// Events delivers the changes of the watched objects.
	Events() <-chan event.GenericEvent
}

// Reconciler reconciles Serverless CRs.
type Reconciler struct {
	client   client.Client
	api      client.Reader
	live     Live
	renderer Renderer
	applier  Applier
	events   EventRecorder
	metrics  Metrics
	opts     Options

	renderMu   sync.Mutex
	lastRender renderMemo

	// refusedPorts are NodePorts the API server called allocated although no
	// Service showed them (an allocation it has not released yet).
	portsMu      sync.Mutex
	refusedPorts map[int32]time.Time
	// learnedRange is the NodePort range the API server named when it
	// refused a port outside it; it wins over Options.NodePortRange.
	learnedRange *values.NodePortRange

	// reads memoizes what the configuration reads from Secrets and Services.
	reads readMemo

	// usageAt is when each namespace's internal registry was last measured.
	usageMu sync.Mutex
	usageAt map[string]time.Time

	// functionsWatch watches Function deletions while an uninstall waits
	// for them; set up by SetupWithManager, nil (a no-op) without it.
	functionsWatch *functionsWatch
}

// renderMemo keeps the last render: the chart only changes with the values,
// and reconciles triggered by status updates of workloads are frequent.
type renderMemo struct {
	key  string
	objs []*unstructured.Unstructured
}

// New wires a Reconciler. c reads Serverless CRs from the cache and writes;
// api reads what the manager does not cache.
func New(c client.Client, api client.Reader, live Live, renderer Renderer, applier Applier, events EventRecorder, metrics Metrics, opts Options) *Reconciler {
	if opts.FunctionsRecheck == 0 {
		opts.FunctionsRecheck = 15 * time.Second
	}
	if opts.DeletionRecheck == 0 {
		opts.DeletionRecheck = 2 * time.Second
	}
	if opts.RolloutTimeout == 0 {
		opts.RolloutTimeout = 5 * time.Minute
	}
	return &Reconciler{client: c, api: api, live: live, renderer: renderer, applier: applier, events: truncatingRecorder{next: events},
		metrics: metrics, opts: opts, refusedPorts: map[int32]time.Time{}}
}

// Serverless CRs of every namespace (those not served get a Warning and
// lose the finalizer), their events, and node metadata:
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=serverlesses,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=serverlesses/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch

// Reconcile runs the steps for one Serverless CR.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cr := &v1alpha1.Serverless{}
	if err := r.client.Get(ctx, req.NamespacedName, cr); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(ctx, req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &state{cr: cr, before: cr.Status.DeepCopy(), log: log.FromContext(ctx)}
	res, err := steps.Run(ctx, s, r.steps(cr), r.observeStep)
	if s.gone {
		r.forget(ctx, cr.Namespace, cr.Name)
		return res, err
	}
	if werr := r.writeStatus(ctx, s); werr != nil {
		if apierrors.IsConflict(werr) || apierrors.IsNotFound(werr) {
			// Someone changed the CR meanwhile; the watch brings it back.
			return ctrl.Result{Requeue: true}, nil
		}
		return ctrl.Result{}, fmt.Errorf("writing status: %w", werr)
	}
	return res, err
}

// observeStep records a step's duration in the metrics.
func (r *Reconciler) observeStep(step string, took time.Duration) {
	if r.metrics != nil {
		r.metrics.ObserveStep(step, took)
	}
}

// forget drops what the manager keeps about a CR that is gone: its state
// series, and the Function watch its uninstall may have started.
func (r *Reconciler) forget(ctx context.Context, namespace, name string) {
	if r.metrics != nil {
		r.metrics.DeleteState(namespace, name)
	}
	if err := r.functionsWatch.release(ctx); err != nil {
		log.FromContext(ctx).Error(err, "stopping the Function watch")
	}
	if r.opts.Named != nil {
		if err := r.opts.Named.Use(ctx, namespace+"/"+name); err != nil {
			log.FromContext(ctx).Error(err, "stopping the watches of the CR's named objects")
		}
	}
}

// writeStatus sends the status when it differs from what was read, and
// emits an event for a state transition.
func (r *Reconciler) writeStatus(ctx context.Context, s *state) error {
	if r.metrics != nil && s.cr.Status.State != "" {
		r.metrics.SetState(s.cr.Namespace, s.cr.Name, s.cr.Status.State)
	}
	if equality.Semantic.DeepEqual(*s.before, s.cr.Status) {
		return nil
	}
	// Server-side apply of the whole status, owned by the manager, its only
	// writer: the stored status becomes exactly the computed one, also when
	// the CR was read from a cache that lags behind the manager's last write
	// (a patch of the differences against such a stale copy would leave out
	// the fields the stale copy happened to hold already, e.g. the state).
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&s.cr.Status)
	if err != nil {
		return fmt.Errorf("converting the status: %w", err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Serverless"))
	obj.SetNamespace(s.cr.Namespace)
	obj.SetName(s.cr.Name)
	if err := r.client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
		client.FieldOwner(module.ManagerName), client.ForceOwnership); err != nil {
		return err
	}
	r.emitEvents(s)
	r.awaitStatus(ctx, s.cr)
	return nil
}

// statusWait bounds how long a status write waits for the cache to show it.
const statusWait = 2 * time.Second

// awaitStatus returns once the cache shows the status just written to cr
// (or after statusWait). The next reconcile of the CR then starts from it:
// one that read the copy from before the write would take the same
// decision again and write it, with its event, a second time.
func (r *Reconciler) awaitStatus(ctx context.Context, cr *v1alpha1.Serverless) {
	want := statusMark(&cr.Status)
	cached := &v1alpha1.Serverless{}
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, statusWait, true, func(ctx context.Context) (bool, error) {
		if err := r.client.Get(ctx, client.ObjectKeyFromObject(cr), cached); err != nil {
			return apierrors.IsNotFound(err), nil
		}
		return statusMark(&cached.Status) == want, nil
	})
}

// statusMark identifies a written status without what the API server
// stores differently (condition times lose their sub-second part).
func statusMark(st *v1alpha1.ServerlessStatus) string {
	c := st.DeepCopy()
	for i := range c.Conditions {
		c.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	data, _ := json.Marshal(c) // a struct of plain fields: cannot fail
	return string(data)
}

// emitEvents reports each changed value and a state transition. A
// transition is told in the last change's event when there is one, so a
// one-value change that starts a rollout costs one event, not two.
func (r *Reconciler) emitEvents(s *state) {
	transition := ""
	if s.before.State != s.cr.Status.State && s.cr.Status.State != "" {
		transition = fmt.Sprintf("state changed from %s to %s: %s", orNone(string(s.before.State)), s.cr.Status.State, s.stateMessage())
	}
	for i, change := range s.changes {
		if i == len(s.changes)-1 && transition != "" {
			change += "; " + transition
			transition = ""
		}
		r.events.Eventf(s.cr, nil, corev1.EventTypeNormal, "ConfigurationChanged", "Configure", "%s", change)
	}
	if transition == "" {
		return
	}
	kind := corev1.EventTypeNormal
	if s.cr.Status.State == v1alpha1.StateError || s.cr.Status.State == v1alpha1.StateWarning {
		kind = corev1.EventTypeWarning
	}
	r.events.Eventf(s.cr, nil, kind, "State"+string(s.cr.Status.State), "Reconcile", "%s", transition)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// state is one reconcile's working set.
type state struct {
	cr     *v1alpha1.Serverless
	before *v1alpha1.ServerlessStatus
	log    logr.Logger

	values map[string]any
	// nodePort is the registry NodePort chosen for this render (0: none).
	nodePort int32
	// pins are the rendered objects made from their own live content.
	pins     apply.Pins
	warnings []string
	// changes describe configuration values that changed, one event each.
	changes []string
	objs    []*unstructured.Unstructured
	applied []*unstructured.Unstructured
	// own is what the uninstall may delete, rendered once per reconcile.
	own *ownershipResult
	// upstream is serverless-operator's installation the takeover step
	// found (nil: none), for the cleanup after the apply.
	upstream *upstreamInstall

	// gone is set when the CR no longer exists (finalizer removed): no
	// status write. The run's flow and result are the steps' outcomes.
	gone bool
}

// setCondition sets a condition with the CR's generation. It is the one
// place where a cause (the manager's own reason) becomes the condition:
// where upstream's operator names the situation with a reason of its own,
// the condition carries that reason and the cause leads the message
// (v1alpha1.NewCondition), so tools written for upstream keep working.
func (s *state) setCondition(condType string, status metav1.ConditionStatus, cause, msg string) metav1.Condition {
	c := v1alpha1.NewCondition(condType, status, cause, msg, s.cr.Generation)
	meta.SetStatusCondition(&s.cr.Status.Conditions, c)
	return c
}

// stateMessage is the message of the condition that explains the state.
func (s *state) stateMessage() string {
	for _, t := range []string{v1alpha1.ConditionDeleted, v1alpha1.ConditionConfigured, v1alpha1.ConditionInstalled} {
		c := meta.FindStatusCondition(s.cr.Status.Conditions, t)
		if c != nil && (c.Status != metav1.ConditionTrue || t == v1alpha1.ConditionInstalled) {
			return c.Message
		}
	}
	return ""
}

// fail ends the reconcile in state Error with a condition and, when the
// condition is new, a Warning event (retries of the same error add none)
// whose reason is the cause, also where the condition carries upstream's
// reason. retry says whether the error may pass by itself (API trouble): it
// is returned then, and controller-runtime retries with backoff. The run
// ends (steps.Fail).
func (r *Reconciler) fail(s *state, condType, cause string, err error, retry bool) (steps.Outcome, error) {
	s.cr.Status.State = v1alpha1.StateError
	s.cr.Status.ObservedGeneration = s.cr.Generation
	c := s.setCondition(condType, metav1.ConditionFalse, cause, err.Error())
	if prev := meta.FindStatusCondition(s.before.Conditions, condType); prev == nil || prev.Status != c.Status ||
		prev.Reason != c.Reason || prev.Message != c.Message {
		r.events.Eventf(s.cr, nil, corev1.EventTypeWarning, cause, "Reconcile", "%s", err.Error())
	}
	s.log.Error(err, "reconcile failed", "reason", cause)
	if retry {
		return steps.Fail(cause), err
	}
	return steps.Fail(cause), nil
}

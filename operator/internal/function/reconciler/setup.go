package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "function"

// SetupWithManager registers the reconciler, wrapped by inflight, with
// workers concurrent passes. Triggers in both modes: Function spec/label
// changes and every change of its Deployments and Services (by watch, no
// polling). Build mode adds its build Jobs, source ConfigMaps and HPAs, the
// end of any build Job or of a pause of builds (waiting Functions get their
// turn at once), the end of a build Pod and changes of the per-namespace
// copies; buildless mode the Functions build mode left something of, once
// that is known.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int, inflight *InFlight) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		// Status-only updates (our own writes) need no pass.
		For(&v1alpha2.Function{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		// Scale to zero: the activator slice and the Service's own slices
		// (which carry the Service's labels, so the Function's name).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(r.sliceFunction))
	if r.moduleSliceWatch != nil {
		// The map functions get the source's context, which holds no logger.
		log := mgr.GetLogger().WithValues("controller", ControllerName)
		b = b.WatchesRawSource(source.Kind(r.moduleSliceWatch, client.Object(&discoveryv1.EndpointSlice{}),
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.moduleSliceFunctions(logr.NewContext(ctx, log), o)
			})))
	}
	if r.cfg.Mode == config.ModeBuildless {
		if r.leftovers != nil {
			b = b.WatchesRawSource(source.Channel(r.leftovers.Wake(), &handler.EnqueueRequestForObject{}))
		}
	} else {
		b = r.watchBuilds(b)
	}
	return b.WithOptions(controller.Options{
		MaxConcurrentReconciles: workers,
		RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](250*time.Millisecond, maxRetryDelay),
	}).Complete(inflight.Wrap(r))
}

// watchBuilds adds build mode's triggers.
func (r *Reconciler) watchBuilds(b *builder.Builder) *builder.Builder {
	return b.
		Owns(&corev1.ConfigMap{}).
		Owns(&batchv1.Job{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}).
		Watches(&batchv1.Job{}, r.slots.WakeHandler()).
		WatchesRawSource(source.Channel(r.slots.wake, &handler.EnqueueRequestForObject{})).
		// A build Pod's end carries its steps' messages (the digest); the
		// scheduler finding no node for it, or finding one at last, is
		// why the build waits or no longer does.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(buildPodFunction),
			builder.WithPredicates(predicate.Funcs{
				UpdateFunc: func(e event.UpdateEvent) bool { return podFinished(e) || placementChanged(e) },
				CreateFunc: func(event.CreateEvent) bool { return false },
			})).
		Watches(&corev1.Secret{}, r.copyHandler(func(o client.Object) bool {
			return o.GetName() == r.cfg.ImageRegistryDefaultDockerConfigSecretName
		})).
		Watches(&corev1.ConfigMap{}, r.copyHandler(func(o client.Object) bool {
			_, isConfig := o.GetLabels()[v1alpha2.LabelConfig]
			return isConfig && strings.HasPrefix(o.GetName(), "dockerfile-")
		})).
		Watches(&corev1.ServiceAccount{}, r.copyHandler(func(o client.Object) bool {
			return o.GetName() == r.cfg.ImagePullAccountName
		}))
}

// copyHandler enqueues every Function of the namespace of a copy that
// matches: a copy appearing ends PrerequisitesMissing, a changed base image
// rebuilds.
func (r *Reconciler) copyHandler(matches func(client.Object) bool) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		if !matches(o) {
			return nil
		}
		var fns v1alpha2.FunctionList
		if err := r.client.List(ctx, &fns, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(fns.Items))
		for i := range fns.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&fns.Items[i])})
		}
		return reqs
	})
}

// sliceFunction maps an EndpointSlice to its Function: always for a slice
// of ours (one left from scale to zero goes), for the Service's own slices
// only when the Function scales to zero (no pass per Pod readiness change
// of every other Function).
func (r *Reconciler) sliceFunction(ctx context.Context, o client.Object) []reconcile.Request {
	reqs := buildPodFunction(ctx, o)
	if len(reqs) == 0 || o.GetLabels()[discoveryv1.LabelManagedBy] == module.ActivatorSliceManagedBy {
		return reqs
	}
	fn := &v1alpha2.Function{}
	if err := r.client.Get(ctx, reqs[0].NamespacedName, fn); err != nil || !scaletozero.Enabled(fn) {
		return nil
	}
	return reqs
}

// moduleService is one of the module's own Services whose EndpointSlices
// passes read (Options.ModuleSlices), with the Functions a change of them
// concerns.
type moduleService struct {
	name      string
	functions func(r *Reconciler, ctx context.Context, slice client.Object) []reconcile.Request
}

// moduleServices is the one list of them: it selects the slices cached
// (ModuleSliceSelector) and maps their changes (moduleSliceFunctions).
func moduleServices() []moduleService {
	return []moduleService{
		// A change of the activator's Pods rewrites every parked slice.
		{module.ActivatorServiceName, (*Reconciler).scaleToZeroFunctions},
		// A build waiting for the internal registry starts once it has a
		// ready endpoint.
		{module.RegistryServiceName, (*Reconciler).registryWaitingFunctions},
	}
}

// moduleServiceSlices are the EndpointSlices of the module's Service
// named service (one of moduleServices), in the module namespace.
func (r *Reconciler) moduleServiceSlices(ctx context.Context, service string) ([]discoveryv1.EndpointSlice, error) {
	var list discoveryv1.EndpointSliceList
	if err := r.moduleSlices.List(ctx, &list, client.InNamespace(r.cfg.BaseNamespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: service}); err != nil {
		return nil, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", r.cfg.BaseNamespace, service, err)
	}
	return list.Items, nil
}

// ModuleSliceSelector selects the EndpointSlices of moduleServices (the
// cache of Options.ModuleSlices holds them, in the module namespace).
func ModuleSliceSelector() (labels.Selector, error) {
	var names []string
	for _, s := range moduleServices() {
		names = append(names, s.name)
	}
	req, err := labels.NewRequirement(discoveryv1.LabelServiceName, selection.In, names)
	if err != nil {
		return nil, fmt.Errorf("selecting the EndpointSlices of %v: %w", names, err)
	}
	return labels.NewSelector().Add(*req), nil
}

// moduleSliceFunctions maps a change of a module Service's EndpointSlice
// to the Functions it concerns.
func (r *Reconciler) moduleSliceFunctions(ctx context.Context, o client.Object) []reconcile.Request {
	for _, s := range moduleServices() {
		if o.GetLabels()[discoveryv1.LabelServiceName] == s.name {
			return s.functions(r, ctx, o)
		}
	}
	return nil
}

// scaleToZeroFunctions are all Functions with scaleConfig.minReplicas 0.
func (r *Reconciler) scaleToZeroFunctions(ctx context.Context, _ client.Object) []reconcile.Request {
	var fns v1alpha2.FunctionList
	if err := r.client.List(ctx, &fns); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range fns.Items {
		if scaletozero.Enabled(&fns.Items[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&fns.Items[i])})
		}
	}
	return reqs
}

// registryWaitingFunctions are the Functions whose build waits for the
// internal registry (registryNotReady).
func (r *Reconciler) registryWaitingFunctions(ctx context.Context, slice client.Object) []reconcile.Request {
	keys := r.registryWaits.take()
	// Says, at debug level, whether a registry change found the builds
	// that wait for it (a wake that finds none leaves them to
	// registryRecheck).
	logr.FromContextOrDiscard(ctx).V(1).Info("internal registry's EndpointSlice changed",
		"slice", slice.GetName(), "waitingBuilds", len(keys))
	reqs := make([]reconcile.Request, 0, len(keys))
	for _, k := range keys {
		reqs = append(reqs, reconcile.Request{NamespacedName: k})
	}
	return reqs
}

// buildPodFunction maps a build Pod, or an EndpointSlice of a Function's
// Service, to its Function (it has the Function's internal labels).
func buildPodFunction(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[v1alpha2.LabelFunctionName]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

// podFinished passes the update in which a build Pod ends.
func podFinished(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*corev1.Pod)
	cur, okNew := e.ObjectNew.(*corev1.Pod)
	return okOld && okNew && !resources.ReadBuildPod(old).Finished && resources.ReadBuildPod(cur).Finished
}

// placementChanged passes the update in which a build Pod becomes
// unschedulable, is placed after that, or gets another message from the
// scheduler.
func placementChanged(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*corev1.Pod)
	cur, okNew := e.ObjectNew.(*corev1.Pod)
	if !okOld || !okNew {
		return false
	}
	was, is := unschedulable(old), unschedulable(cur)
	return (was == nil) != (is == nil) || was != nil && was.Message != is.Message
}

// Package leftovers removes, in buildless mode, what build mode left in the
// cluster: each Function's build Jobs (and their Pods), source ConfigMaps
// and HorizontalPodAutoscaler, and the per-namespace copies (registry
// Secret, Dockerfile ConfigMaps, Function ServiceAccount).
//
// The controller caches none of these kinds in buildless mode. They are
// listed once, when the controller becomes leader, from the API server as
// metadata only, and remembered per Function and per namespace. A
// Function's go once its Deployment runs the buildless template (the
// reconciler says so: Converted), a namespace's copies once every Function
// there does (or at once when it holds none): until then the build-mode
// Pods, which may still pull their image with the copied credentials,
// keep serving. Nothing is polled; a Function with nothing left costs
// nothing.
package leftovers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/copies"
)

// What the listing and the removals need (the reconciler and the copies
// controller need it too).
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=list;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=list;delete
// +kubebuilder:rbac:groups="",resources=configmaps;secrets;serviceaccounts,verbs=list;delete

// Sweeper knows and removes build mode's leftovers.
type Sweeper struct {
	api   client.Reader // the API server: the one listing
	write client.Writer
	cache client.Reader // Functions
	base  string        // the base namespace (its objects are the module's)
	log   logr.Logger
	wake  chan event.GenericEvent

	mu        sync.Mutex
	listed    bool
	functions map[types.NamespacedName][]client.Object // build Jobs, source ConfigMaps, HPAs
	copies    map[string][]client.Object               // by namespace
	converted map[string]map[string]bool               // namespaces with copies: Functions on the buildless template
}

// New returns a Sweeper. api reads from the API server, c is the manager's
// client (writes; Functions from the cache).
func New(api client.Reader, c client.Client, base string, log logr.Logger) *Sweeper {
	return &Sweeper{
		api: api, write: c, cache: c, base: base, log: log,
		wake:      make(chan event.GenericEvent),
		functions: map[types.NamespacedName][]client.Object{},
		copies:    map[string][]client.Object{},
		converted: map[string]map[string]bool{},
	}
}

// NeedLeaderElection: only the leader removes anything.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// Wake names the Functions to reconcile once the leftovers are listed.
func (s *Sweeper) Wake() <-chan event.GenericEvent { return s.wake }

// listRetry is how long a failed listing waits before it is tried again.
const listRetry = 10 * time.Second

// Start lists the leftovers (again after a failure, until ctx ends),
// removes the copies of namespaces without Functions and wakes the
// Functions that have leftovers (a manager.Runnable; it returns then).
func (s *Sweeper) Start(ctx context.Context) error {
	var (
		functions map[types.NamespacedName][]client.Object
		made      map[string][]client.Object
	)
	err := wait.PollUntilContextCancel(ctx, listRetry, true, func(ctx context.Context) (bool, error) {
		var err error
		if functions, made, err = s.list(ctx); err != nil {
			s.log.Error(err, "listing what build mode left; trying again", "after", listRetry)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil // ctx ended
	}
	s.mu.Lock()
	s.functions, s.copies, s.listed = functions, made, true
	namespaces := make([]string, 0, len(made))
	for ns := range made {
		namespaces = append(namespaces, ns)
		s.converted[ns] = map[string]bool{}
	}
	s.mu.Unlock()
	if n := len(functions) + len(made); n > 0 {
		s.log.Info("build mode left objects; they go as their Functions run buildless",
			"functions", len(functions), "namespacesWithCopies", len(made))
	}

	wake := map[types.NamespacedName]bool{}
	for key := range functions {
		wake[key] = true
	}
	for _, ns := range namespaces {
		fns, err := s.functionsIn(ctx, ns)
		if err != nil {
			s.log.Error(err, "listing Functions", "namespace", ns)
			continue
		}
		if len(fns) == 0 {
			s.removeCopies(ctx, ns)
		}
		for _, key := range fns {
			wake[key] = true
		}
	}
	for key := range wake {
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		select {
		case s.wake <- event.GenericEvent{Object: obj}:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// Converted removes fn's leftovers, and its namespace's copies when every
// Function there runs the buildless template now. Before the listing it
// does nothing: the listing wakes fn again.
func (s *Sweeper) Converted(ctx context.Context, fn *v1alpha2.Function) error {
	key := client.ObjectKeyFromObject(fn)
	s.mu.Lock()
	if !s.listed {
		s.mu.Unlock()
		return nil
	}
	objs := s.functions[key]
	delete(s.functions, key)
	pending := s.converted[fn.Namespace]
	if pending != nil {
		pending[fn.Name] = true
	}
	s.mu.Unlock()

	var errs []error
	for _, obj := range objs {
		if err := s.delete(ctx, obj); err != nil {
			errs = append(errs, err)
			s.mu.Lock()
			s.functions[key] = append(s.functions[key], obj)
			s.mu.Unlock()
			continue
		}
		s.log.Info("deleted what build mode left of the Function", "function", key.String(),
			"kind", kindOf(obj), "name", obj.GetName())
	}
	if pending != nil {
		if err := s.namespaceDone(ctx, fn.Namespace); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Forget drops a Function that is gone (its owned leftovers go with it by
// garbage collection); its namespace's copies may go now.
func (s *Sweeper) Forget(ctx context.Context, key types.NamespacedName) {
	s.mu.Lock()
	delete(s.functions, key)
	pending := s.converted[key.Namespace]
	if pending != nil {
		delete(pending, key.Name)
	}
	s.mu.Unlock()
	if pending != nil {
		if err := s.namespaceDone(ctx, key.Namespace); err != nil {
			s.log.Error(err, "removing copies", "namespace", key.Namespace)
		}
	}
}

// namespaceDone removes the copies of ns when each of its Functions runs
// the buildless template.
func (s *Sweeper) namespaceDone(ctx context.Context, ns string) error {
	fns, err := s.functionsIn(ctx, ns)
	if err != nil {
		return err
	}
	s.mu.Lock()
	done := s.converted[ns] != nil
	for _, key := range fns {
		done = done && s.converted[ns][key.Name]
	}
	s.mu.Unlock()
	if done {
		s.removeCopies(ctx, ns)
	}
	return nil
}

func (s *Sweeper) removeCopies(ctx context.Context, ns string) {
	s.mu.Lock()
	objs := s.copies[ns]
	delete(s.copies, ns)
	delete(s.converted, ns)
	s.mu.Unlock()
	for _, obj := range objs {
		if _, err := copies.Delete(ctx, s.write, obj); err != nil {
			// Not retried: a copy left is unused in buildless mode, and the
			// next start of the controller lists it again.
			s.log.Error(err, "deleting a copy build mode made", "namespace", ns, "kind", kindOf(obj), "name", obj.GetName())
			continue
		}
		s.log.Info("deleted a copy build mode made", "namespace", ns, "kind", kindOf(obj), "name", obj.GetName())
	}
}

// functionsIn lists the Functions of ns not being deleted, from the cache.
func (s *Sweeper) functionsIn(ctx context.Context, ns string) ([]types.NamespacedName, error) {
	list := &v1alpha2.FunctionList{}
	if err := s.cache.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Functions in %s: %w", ns, err)
	}
	out := make([]types.NamespacedName, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out = append(out, client.ObjectKeyFromObject(&list.Items[i]))
		}
	}
	return out, nil
}

// childKinds are the kinds build mode made per Function.
var childKinds = []schema.GroupVersionKind{
	batchv1.SchemeGroupVersion.WithKind("Job"),
	corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler"),
}

// list reads the leftovers: the Functions' children by the controller's
// label (a child names its Function), and the copies.
func (s *Sweeper) list(ctx context.Context) (map[types.NamespacedName][]client.Object, map[string][]client.Object, error) {
	functions := map[types.NamespacedName][]client.Object{}
	for _, gvk := range childKinds {
		selector := client.MatchingLabels{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}
		opts := []client.ListOption{selector, client.Limit(500)}
		for {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := s.api.List(ctx, list, opts...); err != nil {
				return nil, nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
			}
			for i := range list.Items {
				obj := &list.Items[i]
				name := obj.Labels[v1alpha2.LabelFunctionName]
				if name == "" || obj.DeletionTimestamp != nil {
					continue
				}
				obj.SetGroupVersionKind(gvk)
				key := types.NamespacedName{Namespace: obj.Namespace, Name: name}
				functions[key] = append(functions[key], obj)
			}
			if list.Continue == "" {
				break
			}
			opts = []client.ListOption{selector, client.Limit(500), client.Continue(list.Continue)}
		}
	}
	made, err := copies.Made(ctx, s.api, s.base)
	if err != nil {
		return nil, nil, err
	}
	byNamespace := map[string][]client.Object{}
	for _, obj := range made {
		byNamespace[obj.GetNamespace()] = append(byNamespace[obj.GetNamespace()], obj)
	}
	return functions, byNamespace, nil
}

// delete removes one child of a Function in the background (a Job's Pods
// go with it), unless it was replaced meanwhile.
func (s *Sweeper) delete(ctx context.Context, obj client.Object) error {
	uid := obj.GetUID()
	err := s.write.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

func kindOf(obj client.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return fmt.Sprintf("%T", obj)
}

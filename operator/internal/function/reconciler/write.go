package reconciler

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Writes go to the API server; the next pass reads the cache. Each write
// waits (reading only the cache, no request) until the cache shows it, so a
// pass triggered right after never decides on an older picture — e.g. never
// creates a second Job because the first one is not in the cache yet. A wait
// that times out is not an error: the watch catches up.

func (r *Reconciler) create(ctx context.Context, obj client.Object) error {
	if err := r.client.Create(ctx, obj); err != nil {
		return err
	}
	r.awaitCache(ctx, obj, func(err error, cached client.Object) bool { return err == nil })
	return nil
}

func (r *Reconciler) update(ctx context.Context, obj client.Object) error {
	if err := r.client.Update(ctx, obj); err != nil {
		return err
	}
	r.awaitVersion(ctx, obj)
	return nil
}

// remove deletes obj in the background (Pods and ReplicaSets go with their
// owners) and waits until the cache no longer lists it as live.
func (r *Reconciler) remove(ctx context.Context, obj client.Object) error {
	err := r.client.Delete(ctx, obj, client.PropagationPolicy("Background"))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting %T %s: %w", obj, obj.GetName(), err)
	}
	r.awaitCache(ctx, obj, func(err error, cached client.Object) bool {
		return apierrors.IsNotFound(err) || (err == nil && cached.GetDeletionTimestamp() != nil)
	})
	return nil
}

// awaitVersion waits until the cached copy of obj is at least at obj's
// resourceVersion (just returned by a write).
func (r *Reconciler) awaitVersion(ctx context.Context, obj client.Object) {
	want, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	r.awaitCache(ctx, obj, func(err error, cached client.Object) bool {
		if err != nil {
			return apierrors.IsNotFound(err)
		}
		got, perr := strconv.ParseUint(cached.GetResourceVersion(), 10, 64)
		return perr != nil || got >= want
	})
}

func (r *Reconciler) awaitCache(ctx context.Context, obj client.Object, done func(err error, cached client.Object) bool) {
	look := r.cacheLook(ctx, obj)
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, r.wait, true, func(ctx context.Context) (bool, error) {
		cached, err := look(ctx)
		return done(err, cached), nil
	})
}

// cacheLook returns how to read obj's cached copy while waiting for it: the
// informer's stored object itself (read only; a wait looks every 5 ms, and a
// deep copy each time was most of the controller's garbage in a burst of
// Functions), or, without informers, a copy through the client.
func (r *Reconciler) cacheLook(ctx context.Context, obj client.Object) func(context.Context) (client.Object, error) {
	key := client.ObjectKeyFromObject(obj)
	if r.informers != nil {
		if inf, err := r.informers.GetInformer(ctx, obj); err == nil {
			if s, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
				store, gr := s.GetStore(), schema.GroupResource{Resource: fmt.Sprintf("%T", obj)}
				storeKey := toolscache.MetaObjectToName(obj).String()
				return func(context.Context) (client.Object, error) {
					item, exists, err := store.GetByKey(storeKey)
					if err != nil {
						return nil, err
					}
					cached, ok := item.(client.Object)
					if !exists || !ok {
						return nil, apierrors.NewNotFound(gr, key.Name)
					}
					return cached, nil
				}
			}
		}
	}
	cached, ok := obj.DeepCopyObject().(client.Object)
	return func(ctx context.Context) (client.Object, error) {
		if !ok {
			return nil, fmt.Errorf("%T is not a client.Object", obj)
		}
		return cached, r.client.Get(ctx, key, cached)
	}
}

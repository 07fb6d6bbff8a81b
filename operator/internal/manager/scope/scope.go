// Package scope keeps what the manager reads and may write in the module
// namespace, which is the served Serverless CR's namespace and may change
// while the manager runs. A Scope owns one controller-runtime cache of the
// module's namespaced objects in that namespace (watch.NamespaceCacheOptions)
// and replaces it, stopping the old one, when the module namespace moves; a
// Binder gives the manager its namespaced permissions there (a RoleBinding
// to namespaced.ClusterRole) for as long as the module lives there.
package scope

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/internal/manager/scope/namespaced"
)

// NewCache builds a cache of the module's namespaced objects in namespace.
type NewCache func(namespace string) (cache.Cache, error)

// Watcher prepares a new cache before it starts: it gets the informers the
// manager reads and adds the controller's watches on them. It is called for
// every cache the Scope builds, so the watches follow the namespace.
type Watcher = func(ctx context.Context, c cache.Cache) error

// Scope is the module namespace of the moment and its cache. It reads (Get,
// List) from that cache; a read of another namespace fails, as a read of a
// kind the cache does not hold does. Scope is a manager Runnable: its caches
// live no longer than the manager.
//
// The manager's own namespace (home) is the module namespace until a CR
// takes the module elsewhere (Enter) and again after it left (Leave).
type Scope struct {
	home        string
	newCache    NewCache
	binder      *Binder
	syncTimeout time.Duration

	started chan struct{}
	runCtx  context.Context // the manager's, set by Start

	moveMu   sync.Mutex // one move at a time
	mu       sync.RWMutex
	cur      *namespaceCache
	watchers []Watcher
}

type namespaceCache struct {
	namespace string
	cache     cache.Cache
	stop      context.CancelFunc // nil until started
}

// DefaultSyncTimeout bounds how long a new namespace's cache may take to
// list its objects (a RoleBinding just created may take a moment to act).
const DefaultSyncTimeout = 30 * time.Second

// New builds the scope of the manager's namespace home; binder (nil: none)
// grants the manager its namespaced permissions in other namespaces;
// syncTimeout (0: DefaultSyncTimeout) bounds a new cache's first listing.
func New(home string, newCache NewCache, binder *Binder, syncTimeout time.Duration) (*Scope, error) {
	c, err := newCache(home)
	if err != nil {
		return nil, fmt.Errorf("building the cache of namespace %s: %w", home, err)
	}
	if syncTimeout == 0 {
		syncTimeout = DefaultSyncTimeout
	}
	return &Scope{home: home, newCache: newCache, binder: binder, syncTimeout: syncTimeout,
		started: make(chan struct{}), cur: &namespaceCache{namespace: home, cache: c}}, nil
}

// Home is the manager's own namespace.
func (s *Scope) Home() string { return s.home }

// Namespace is the module namespace of the moment.
func (s *Scope) Namespace() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur.namespace
}

// Watch registers w for every cache from now on and runs it on the current
// one (before Start: the controller then waits for those watches to sync
// when it starts).
func (s *Scope) Watch(ctx context.Context, w Watcher) error {
	s.moveMu.Lock()
	defer s.moveMu.Unlock()
	s.mu.Lock()
	s.watchers = append(s.watchers, w)
	c := s.cur.cache
	s.mu.Unlock()
	return w(ctx, c)
}

// Start runs the current cache until ctx ends, then stops it.
func (s *Scope) Start(ctx context.Context) error {
	s.moveMu.Lock()
	s.runCtx = ctx
	s.mu.Lock()
	s.cur.stop = run(ctx, s.cur.cache)
	s.mu.Unlock()
	close(s.started)
	s.moveMu.Unlock()

	<-ctx.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur.stop()
	return nil
}

// NeedLeaderElection is false: like the manager's cache, the scope's runs
// on every replica.
func (s *Scope) NeedLeaderElection() bool { return false }

// Enter makes namespace the module namespace: the manager gets its
// namespaced permissions there (outside home), then the cache moves. In the
// current namespace it only binds again when its RoleBinding is gone from
// the cache (someone deleted it and removed its finalizer: the watches
// already running still report that), which costs no request while it is
// there.
func (s *Scope) Enter(ctx context.Context, namespace string) error {
	if s.Namespace() == namespace {
		if s.binder == nil || namespace == s.home {
			return nil
		}
		rb := &metav1.PartialObjectMetadata{}
		rb.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBinding"))
		err := s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: namespaced.ClusterRole}, rb)
		if !apierrors.IsNotFound(err) {
			return err
		}
		return s.binder.Bind(ctx, namespace)
	}
	if s.binder != nil {
		if err := s.binder.Bind(ctx, namespace); err != nil {
			return err
		}
	}
	return s.move(ctx, namespace)
}

// Leave gives namespace up once the module is gone from it: the cache moves
// back home and the manager drops its permissions there.
func (s *Scope) Leave(ctx context.Context, namespace string) error {
	if s.Namespace() == namespace {
		if err := s.move(ctx, s.home); err != nil {
			return err
		}
	}
	if s.binder == nil {
		return nil
	}
	return s.binder.Unbind(ctx, namespace)
}

// move replaces the current cache by a synced one of namespace.
func (s *Scope) move(ctx context.Context, namespace string) error {
	select {
	case <-s.started:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the manager to start: %w", ctx.Err())
	}
	s.moveMu.Lock()
	defer s.moveMu.Unlock()
	if s.Namespace() == namespace {
		return nil
	}
	c, err := s.newCache(namespace)
	if err != nil {
		return fmt.Errorf("building the cache of namespace %s: %w", namespace, err)
	}
	s.mu.RLock()
	watchers := append([]Watcher(nil), s.watchers...)
	s.mu.RUnlock()
	for _, w := range watchers {
		if err := w(ctx, c); err != nil {
			return fmt.Errorf("watching namespace %s: %w", namespace, err)
		}
	}
	stop := run(s.runCtx, c)
	syncCtx, cancel := context.WithTimeout(ctx, s.syncTimeout)
	defer cancel()
	if !c.WaitForCacheSync(syncCtx) {
		stop()
		return fmt.Errorf("reading namespace %s: its objects were not listed within %s (missing permissions?): %w",
			namespace, s.syncTimeout, errors.Join(ctx.Err(), errors.New("cache not synced")))
	}
	s.mu.Lock()
	old := s.cur
	s.cur = &namespaceCache{namespace: namespace, cache: c, stop: stop}
	s.mu.Unlock()
	old.stop()
	return nil
}

// run starts c until ctx ends or the returned stop is called.
func run(ctx context.Context, c cache.Cache) context.CancelFunc {
	cctx, cancel := context.WithCancel(ctx)
	go func() { _ = c.Start(cctx) }()
	return cancel
}

// Get reads from the current cache.
func (s *Scope) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return s.reader().Get(ctx, key, obj, opts...)
}

// List reads from the current cache.
func (s *Scope) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return s.reader().List(ctx, list, opts...)
}

func (s *Scope) reader() client.Reader {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur.cache
}

package watch

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// ErrNotWatched is Get's answer for an object no Use declared.
var ErrNotWatched = errors.New("not watched by name")

// NamedKey names one object watched by name.
type NamedKey struct {
	GVK schema.GroupVersionKind
	types.NamespacedName
}

func (k NamedKey) String() string { return k.GVK.Kind + " " + k.NamespacedName.String() }

// Named watches single objects by name, as metadata: the users' objects the
// configuration depends on (the telemetry traces Service, the registry
// Secret a CR names). The manager's cache selects the module's objects by
// label, so a namespace with thousands of foreign Secrets and Services
// costs it nothing; these few objects carry no module label and are
// watched one by one instead (a list and watch with a metadata.name field
// selector), each holding one object at most. Their changes reach the
// controller through Events.
//
// A watch starts when a CR's configuration first asks for its object (Use)
// and stops when no CR asks for it any more. Named is a manager Runnable:
// watches live no longer than the manager.
type Named struct {
	client metadata.Interface
	mapper meta.RESTMapper
	events chan event.GenericEvent

	started chan struct{}
	mu      sync.Mutex
	ctx     context.Context // the manager's, set by Start
	watches map[NamedKey]*namedWatch
	// users maps an owner (a CR) to the keys its configuration reads.
	users map[string][]NamedKey
}

type namedWatch struct {
	informer toolscache.SharedIndexInformer
	cancel   context.CancelFunc
}

// NewNamed watches with client, finding resources with mapper.
func NewNamed(c metadata.Interface, mapper meta.RESTMapper) *Named {
	return &Named{
		client:  c,
		mapper:  mapper,
		events:  make(chan event.GenericEvent, 64),
		started: make(chan struct{}),
		watches: map[NamedKey]*namedWatch{},
		users:   map[string][]NamedKey{},
	}
}

// Events delivers a generic event for every change of a watched object
// after its first listing (the reconcile that started the watch read it).
func (n *Named) Events() <-chan event.GenericEvent { return n.events }

// Start runs until ctx ends, then stops every watch.
func (n *Named) Start(ctx context.Context) error {
	n.mu.Lock()
	n.ctx = ctx
	n.mu.Unlock()
	close(n.started)
	<-ctx.Done()
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, w := range n.watches {
		w.cancel()
		delete(n.watches, k)
	}
	return nil
}

// NeedLeaderElection is false: the watches start when a reconcile asks.
func (n *Named) NeedLeaderElection() bool { return false }

// Use declares the objects owner's configuration reads: their watches are
// started, and synced when Use returns; watches no owner uses any more stop.
// Use(owner) with no keys releases the owner's.
func (n *Named) Use(ctx context.Context, owner string, keys ...NamedKey) error {
	select {
	case <-n.started:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the named watches to start: %w", ctx.Err())
	}
	n.mu.Lock()
	if len(keys) == 0 {
		delete(n.users, owner)
	} else {
		n.users[owner] = append([]NamedKey(nil), keys...)
	}
	var start []NamedKey
	for _, k := range keys {
		if n.watches[k] == nil {
			start = append(start, k)
		}
	}
	n.stopUnused()
	for _, k := range start {
		if err := n.startLocked(k); err != nil {
			n.mu.Unlock()
			return err
		}
	}
	var synced []toolscache.InformerSynced
	for _, k := range keys {
		synced = append(synced, n.watches[k].informer.HasSynced)
	}
	n.mu.Unlock()
	// A watch that cannot list (no permission in that namespace, say) keeps
	// retrying; the reconcile waiting for it must not hang.
	wctx, cancel := context.WithTimeout(ctx, namedSyncTimeout)
	defer cancel()
	if !toolscache.WaitForCacheSync(wctx.Done(), synced...) {
		return fmt.Errorf("the watches of %v have not listed within %s: %w", keys, namedSyncTimeout, wctx.Err())
	}
	return nil
}

// namedSyncTimeout bounds how long Use waits for new watches to list.
const namedSyncTimeout = 30 * time.Second

// Get returns the metadata of a watched object; found is false when it does
// not exist. Asking for an object no Use declared is ErrNotWatched: there
// is no watch to ask.
func (n *Named) Get(key NamedKey) (obj *metav1.PartialObjectMetadata, found bool, err error) {
	n.mu.Lock()
	w := n.watches[key]
	n.mu.Unlock()
	if w == nil {
		return nil, false, fmt.Errorf("%s: %w", key, ErrNotWatched)
	}
	if !w.informer.HasSynced() {
		return nil, false, fmt.Errorf("the watch of %s has not listed yet", key)
	}
	item, exists, err := w.informer.GetStore().GetByKey(key.Namespace + "/" + key.Name)
	if err != nil || !exists {
		return nil, false, err
	}
	m, ok := item.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, false, fmt.Errorf("the watch of %s holds a %T", key, item)
	}
	out := m.DeepCopy()
	out.SetGroupVersionKind(key.GVK)
	return out, true, nil
}

// Watched lists the keys watched now, sorted.
func (n *Named) Watched() []NamedKey {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]NamedKey, 0, len(n.watches))
	for k := range n.watches {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// stopUnused stops the watches no owner uses; n.mu is held.
func (n *Named) stopUnused() {
	used := map[NamedKey]bool{}
	for _, keys := range n.users {
		for _, k := range keys {
			used[k] = true
		}
	}
	for k, w := range n.watches {
		if !used[k] {
			w.cancel()
			delete(n.watches, k)
		}
	}
}

// startLocked starts the watch of k; n.mu is held.
func (n *Named) startLocked(k NamedKey) error {
	mapping, err := n.mapper.RESTMapping(k.GVK.GroupKind(), k.GVK.Version)
	if err != nil {
		return fmt.Errorf("watching %s: %w", k, err)
	}
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", k.Name).String()
	}
	inf := metadatainformer.NewFilteredMetadataInformer(n.client, mapping.Resource, k.Namespace, 0, toolscache.Indexers{}, byName).Informer()
	if err := inf.SetTransform(identityOnly); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(n.ctx)
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				n.send(ctx, obj)
			}
		},
		UpdateFunc: func(before, after any) {
			b, errB := meta.Accessor(before)
			a, errA := meta.Accessor(after)
			if errB == nil && errA == nil && b.GetResourceVersion() == a.GetResourceVersion() {
				return // a resync, nothing changed
			}
			n.send(ctx, after)
		},
		DeleteFunc: func(obj any) { n.send(ctx, obj) },
	}); err != nil {
		cancel()
		return err
	}
	go inf.RunWithContext(ctx)
	n.watches[k] = &namedWatch{informer: inf, cancel: cancel}
	return nil
}

// send hands an event to the controller; it gives up when the watch stops.
func (n *Named) send(ctx context.Context, obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	select {
	case n.events <- event.GenericEvent{Object: o}:
	case <-ctx.Done():
	}
}

// identityOnly keeps of a watched object what the manager reads: that it
// exists and at which resourceVersion (its content is read from the API
// server, see the reconciler's readThrough). A Secret applied with kubectl
// carries its data in the last-applied annotation; it is not kept.
func identityOnly(in any) (any, error) {
	if m, ok := in.(metav1.Object); ok {
		m.SetManagedFields(nil)
		m.SetLabels(nil)
		m.SetAnnotations(nil)
		m.SetOwnerReferences(nil)
		m.SetFinalizers(nil)
	}
	return in, nil
}

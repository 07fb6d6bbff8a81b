package activator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// The cluster's labels on EndpointSlices (discoveryv1.LabelServiceName,
// discoveryv1.LabelManagedBy).
const (
	labelServiceName = discoveryv1.LabelServiceName
	labelSliceOwner  = discoveryv1.LabelManagedBy
)

// SliceSelector selects every EndpointSlice the activator reads, ours and
// the Function Services' own: both carry the Function's child label
// serverless.kyma-project.io/managed-by=function-controller (ours from the
// Function controller, the Services' because the cluster's EndpointSlice
// controller copies a Service's labels onto its slices). Ours are told
// apart by endpointslice.kubernetes.io/managed-by.
func SliceSelector() map[string]string {
	return map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}
}

// CacheOptions is everything the activator caches: Functions in every
// namespace and the EndpointSlices of SliceSelector.
func CacheOptions() cache.Options {
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&discoveryv1.EndpointSlice{}: {Label: labels.SelectorFromSet(SliceSelector())},
		},
	}
}

// EventRecorder writes events.k8s.io events (the manager's recorder).
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Kube is the Holder's view of the cluster: its Waker (the Function's scale
// subresource), Replicas (EndpointSlices and the Running condition from the
// cache) and FailureRecorder (events on the Function).
type Kube struct {
	// Cache reads Functions and EndpointSlices.
	Cache client.Reader
	// Client writes the scale subresource (read from the API server, not
	// the cache, for its resourceVersion).
	Client client.Client
	// Events records failed wakes; may be nil.
	Events EventRecorder
	// Port of the replicas; scaletozero.RuntimePort if zero (tests serve elsewhere).
	Port int
	// Recheck bounds how long Await waits without a change notice
	// (Changed) before it looks again; 1 s if zero.
	Recheck time.Duration
	// Probe asks a starting replica whether it answers; HTTPProbe over a
	// client of its own per wait if nil (Setup gives one for all).
	Probe ProbeFunc
	// ProbeEvery and ProbeLimit pace and bound the probes of one starting
	// replica in one wake; DefaultProbeEvery and DefaultProbeLimit if zero.
	ProbeEvery time.Duration
	ProbeLimit int
	// Mesh is the service mesh the activator runs in (v1alpha1.MeshIstio;
	// "" none). In mesh mode a replica is reached with the Host of the
	// Function's private Service (scaletozero.MeshAuthority), and only a
	// replica that Service lists is probed or forwarded to: the
	// activator's sidecar wraps only those requests in mutual TLS.
	Mesh string

	probed probed

	mu      sync.Mutex
	wakes   map[types.NamespacedName]time.Time
	changed chan struct{}
}

var (
	_ Waker           = (*Kube)(nil)
	_ Replicas        = (*Kube)(nil)
	_ FailureRecorder = (*Kube)(nil)
	_ Timeouts        = (*Kube)(nil)
)

// Changed tells waiting Awaits that a Function or an EndpointSlice
// changed; the informers' event handlers call it.
func (k *Kube) Changed() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.changed != nil {
		close(k.changed)
		k.changed = nil
	}
}

func (k *Kube) changes() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.changed == nil {
		k.changed = make(chan struct{})
	}
	return k.changed
}

// Wake sets the Function's replicas from 0 to 1; it leaves any other count
// alone, so it never lowers what the HPA or a user set.
func (k *Kube) Wake(ctx context.Context, fn types.NamespacedName) error {
	k.mu.Lock()
	if k.wakes == nil {
		k.wakes = map[types.NamespacedName]time.Time{}
	}
	// Before the write: a condition the write causes is never older.
	k.wakes[fn] = time.Now()
	k.mu.Unlock()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := SetScale(ctx, k.Client, fn, 0, 1)
		return err
	})
}

// SetScale writes replicas `to` into the Function's scale subresource when
// it reads `from`, with the resourceVersion it read, so a change made in
// between fails with a conflict instead of being overwritten. It reports
// whether it wrote.
func SetScale(ctx context.Context, c client.Client, fn types.NamespacedName, from, to int32) (bool, error) {
	f := &v1alpha2.Function{}
	f.Namespace, f.Name = fn.Namespace, fn.Name
	scale := &autoscalingv1.Scale{}
	if err := c.SubResource("scale").Get(ctx, f, scale); err != nil {
		return false, fmt.Errorf("reading the scale of Function %s: %w", fn, err)
	}
	if scale.Spec.Replicas != from {
		return false, nil
	}
	scale.Spec.Replicas = to
	if err := c.SubResource("scale").Update(ctx, f, client.WithSubResourceBody(scale)); err != nil {
		return false, fmt.Errorf("scaling Function %s from %d to %d: %w", fn, from, to, err)
	}
	return true, nil
}

// Replica is one replica of a Function.
type Replica struct {
	// UID of its Pod ("" when the endpoint names none).
	UID string
	URL *url.URL
	// Authority is the Host the activator's requests to it carry: in mesh
	// mode, when the Function's private Service lists it; "" otherwise.
	Authority string
}

// ReadyReplicas are the ready endpoints of the Function's Service's own
// EndpointSlices (not the activator's), in the order the slices list them.
// In mesh mode they are all of them, also those the private Service does
// not list (without Authority): their scrapes fail, and the leader says why.
func (k *Kube) ReadyReplicas(ctx context.Context, fn types.NamespacedName) ([]Replica, error) {
	ready, _, err := k.replicas(ctx, fn)
	return ready, err
}

// replicas are the endpoints of the Function's Service's own EndpointSlices
// (never the activator's, nor another Service's): the ready ones, and the
// starting ones (listed, not ready, not terminating), in the order the
// slices list them.
func (k *Kube) replicas(ctx context.Context, fn types.NamespacedName) (ready, starting []Replica, err error) {
	slices := &discoveryv1.EndpointSliceList{}
	if err := k.Cache.List(ctx, slices, client.InNamespace(fn.Namespace),
		client.MatchingLabels{labelServiceName: fn.Name}); err != nil {
		return nil, nil, fmt.Errorf("listing the EndpointSlices of Function %s: %w", fn, err)
	}
	port := k.Port
	if port == 0 {
		port = scaletozero.RuntimePort
	}
	var private map[string]bool
	if k.Mesh != "" {
		if private, err = k.privateAddresses(ctx, fn); err != nil {
			return nil, nil, err
		}
	}
	for _, s := range slices.Items {
		if s.Labels[labelSliceOwner] == module.ActivatorSliceManagedBy {
			continue
		}
		for _, e := range s.Endpoints {
			c := e.Conditions
			if len(e.Addresses) == 0 || (c.Terminating != nil && *c.Terminating) {
				continue
			}
			r := Replica{URL: &url.URL{Scheme: "http", Host: net.JoinHostPort(e.Addresses[0], strconv.Itoa(port))}}
			if e.TargetRef != nil {
				r.UID = string(e.TargetRef.UID)
			}
			if private[e.Addresses[0]] {
				r.Authority = scaletozero.MeshAuthority(fn.Namespace, fn.Name)
			}
			// A missing ready condition means ready (the API's convention).
			if c.Ready == nil || *c.Ready {
				ready = append(ready, r)
			} else {
				starting = append(starting, r)
			}
		}
	}
	return ready, starting, nil
}

// privateAddresses are the addresses the Function's private Service lists
// (mesh mode): the slices the cluster's EndpointSlice controller made for a
// headless Service of the private name that carries the Function's name.
// Any other Service of that name (a user's, or another Function's own
// Service) is never named as the Host: its route would not keep the
// address dialled.
func (k *Kube) privateAddresses(ctx context.Context, fn types.NamespacedName) (map[string]bool, error) {
	slices := &discoveryv1.EndpointSliceList{}
	if err := k.Cache.List(ctx, slices, client.InNamespace(fn.Namespace), client.MatchingLabels{
		labelServiceName:           scaletozero.PrivateServiceName(fn.Name),
		v1alpha2.LabelFunctionName: fn.Name,
	}, client.HasLabels{corev1.IsHeadlessService}); err != nil {
		return nil, fmt.Errorf("listing the EndpointSlices of Function %s's private Service: %w", fn, err)
	}
	out := map[string]bool{}
	for _, s := range slices.Items {
		if s.Labels[labelSliceOwner] == module.ActivatorSliceManagedBy {
			continue
		}
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				out[a] = true
			}
		}
	}
	return out, nil
}

// reachable keeps the replicas the activator can send requests to: all,
// or in mesh mode those its sidecar reaches through the private Service.
func (k *Kube) reachable(rs []Replica) []Replica {
	if k.Mesh == "" {
		return rs
	}
	out := rs[:0:0]
	for _, r := range rs {
		if r.Authority != "" {
			out = append(out, r)
		}
	}
	return out
}

// Ready returns, without waiting, a replica the cluster lists as ready, or
// else one that answered the activator's probe moments ago.
func (k *Kube) Ready(fn types.NamespacedName) (*url.URL, bool) {
	ready, starting, err := k.replicas(context.Background(), fn)
	if err != nil {
		return nil, false
	}
	ready, starting = k.reachable(ready), k.reachable(starting)
	if len(ready) > 0 {
		return ready[0].URL, true
	}
	return k.probed.trusted(fn, starting, time.Now())
}

// Failed forgets a replica that answered a probe but whose forwarding then
// failed: its container went, and kubelet's verdict is awaited again.
func (k *Kube) Failed(fn types.NamespacedName, u *url.URL) {
	k.probed.failed(fn, u)
}

// Await waits for a replica: one the cluster lists as ready, or a starting
// one that answers the activator's probe first. It fails with StartFailed
// once the Function's Running condition is False with a reason
// v1alpha2.CannotStart names and changed after the wake began (an older one
// is from before the Function was at zero), and when ctx's deadline passes
// with the WakeTimeout that names the Function's reported cause, if any.
func (k *Kube) Await(ctx context.Context, fn types.NamespacedName) (*url.URL, error) {
	k.mu.Lock()
	began, ok := k.wakes[fn]
	delete(k.wakes, fn)
	k.mu.Unlock()
	if !ok {
		began = time.Now()
	}
	// The API keeps condition times to the second.
	began = began.Truncate(time.Second)
	recheck := k.Recheck
	if recheck <= 0 {
		recheck = time.Second
	}
	probe, every, limit := k.Probe, k.ProbeEvery, k.ProbeLimit
	if probe == nil {
		probe = HTTPProbe(probeClient())
	}
	if every <= 0 {
		every = DefaultProbeEvery
	}
	if limit <= 0 {
		limit = DefaultProbeLimit
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	running := newProbes(probe, every, limit)
	defer running.stop()
	for {
		changed := k.changes()
		ready, starting, err := k.replicas(ctx, fn)
		if err != nil {
			return nil, err
		}
		ready, starting = k.reachable(ready), k.reachable(starting)
		if len(ready) > 0 {
			return ready[0].URL, nil
		}
		if err := k.startFailed(ctx, fn, began); err != nil {
			return nil, err
		}
		running.follow(pctx, starting)
		select {
		case <-ctx.Done():
			if f := k.waitCause(fn); f != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, f
			}
			return nil, fmt.Errorf("no ready replica of Function %s yet: %w", fn, ctx.Err())
		case u := <-running.first:
			k.probed.answered(fn, u, time.Now())
			return u, nil
		case <-changed:
		case <-time.After(recheck):
		}
	}
}

func (k *Kube) startFailed(ctx context.Context, fn types.NamespacedName, began time.Time) error {
	f := &v1alpha2.Function{}
	if err := k.Cache.Get(ctx, fn, f); err != nil {
		if apierrors.IsNotFound(err) {
			return &Failure{Reason: StartFailed, Cause: "NotFound", Detail: "the Function was deleted"}
		}
		return fmt.Errorf("reading Function %s: %w", fn, err)
	}
	for _, c := range f.Status.Conditions {
		if c.Type == v1alpha2.ConditionRunning && c.Status == corev1.ConditionFalse &&
			v1alpha2.CannotStart(c.Reason) && !c.LastTransitionTime.Time.Before(began) {
			return &Failure{Reason: StartFailed, Cause: c.Reason, Detail: c.Message}
		}
	}
	return nil
}

// waitCause is the WakeTimeout of a Function that reports why its replica
// waits (Running ReplicaUnschedulable: the cluster has no room for it), or
// nil. Its Cause carries the scheduler's words, which name nodes and
// resources only, so that the 503 tells any caller that the cluster is
// full; the whole message, which names the Pod, stays in Detail.
func (k *Kube) waitCause(fn types.NamespacedName) *Failure {
	f := &v1alpha2.Function{}
	if err := k.Cache.Get(context.Background(), fn, f); err != nil {
		return nil
	}
	for _, c := range f.Status.Conditions {
		if c.Type != v1alpha2.ConditionRunning || c.Reason != v1alpha2.ReasonReplicaUnschedulable {
			continue
		}
		words := c.Message
		if _, after, ok := strings.Cut(c.Message, v1alpha2.NotPlacedSeparator); ok {
			words = after
		}
		return &Failure{Reason: WakeTimeout, Cause: c.Reason + ": " + words,
			Detail: "no replica ready within the hold timeout: " + c.Message}
	}
	return nil
}

// HoldTimeout is the Function's own hold timeout (scaletozero.HoldTimeout),
// def when it sets none or sets one that is not valid (the Function
// controller warns of that on the Function).
func (k *Kube) HoldTimeout(fn types.NamespacedName, def time.Duration) time.Duration {
	f := &v1alpha2.Function{}
	if err := k.Cache.Get(context.Background(), fn, f); err != nil {
		return def
	}
	d, _ := scaletozero.HoldTimeout(f, def)
	return d
}

// WakeFailed records a Warning event on the Function with the failure's
// reason. The note is the Failure's Error: its Detail comes from the
// Function's status or an API error, which its owner may read anyway.
func (k *Kube) WakeFailed(fn types.NamespacedName, f *Failure) {
	if k.Events == nil {
		return
	}
	obj := &v1alpha2.Function{}
	obj.Namespace, obj.Name = fn.Namespace, fn.Name
	if err := k.Cache.Get(context.Background(), fn, obj); err != nil {
		// Gone: nothing to attach the event to.
		return
	}
	k.Events.Eventf(obj, nil, corev1.EventTypeWarning, string(f.Reason), "Wake", "%s", f.Error())
}

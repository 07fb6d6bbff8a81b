package activator

import (
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"

	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// SlicePortName is the name of the one port of our EndpointSlices.
const SlicePortName = "http"

// DefaultLeave bounds how long a stopping replica keeps listening while
// EndpointSlices list it: the controller rewrites them within a second or
// two, then the nodes get module.EndpointSettle.
const DefaultLeave = 30 * time.Second

// Listeners keeps one HTTP listener per port of the activator's
// EndpointSlices, each serving Handler(<slice namespace>/<service name>):
// the port a connection arrives on names its Function.
type Listeners struct {
	// Cache lists our EndpointSlices.
	Cache client.Reader
	// Handler answers the requests for one Function (Holder.Handler).
	Handler func(fn types.NamespacedName) http.Handler
	Log     logr.Logger
	// Host to listen on; all addresses when empty.
	Host string
	// Reserved ports are never listened on (the Pod's metrics and probes).
	Reserved []int
	// Resync bounds how long a port that could not be opened waits for
	// another try without a change of the slices; 10 s if zero.
	Resync time.Duration
	// ShutdownTimeout bounds how long requests in flight are waited for
	// when the activator stops.
	ShutdownTimeout time.Duration
	// Address is this replica's Pod address. The nodes send connections
	// here for as long as a slice of ours lists it, so a stopping replica
	// keeps listening until none does and the nodes have had Settle to
	// follow (Leave bounds the whole). Nothing is awaited when empty.
	Address string
	// Settle is module.EndpointSettle if zero.
	Settle time.Duration
	// Leave bounds how long a stopping replica keeps listening;
	// DefaultLeave if zero.
	Leave time.Duration

	mu      sync.Mutex
	open    map[int32]*listener
	kick    chan struct{}
	refused map[int32]string
	synced  bool
}

type listener struct {
	fn     types.NamespacedName
	server *http.Server
}

// NeedLeaderElection is false: every replica serves.
func (l *Listeners) NeedLeaderElection() bool { return false }

// Changed asks for a Sync; the EndpointSlice informer calls it.
func (l *Listeners) Changed() {
	select {
	case l.kicks() <- struct{}{}:
	default:
	}
}

func (l *Listeners) kicks() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kick == nil {
		l.kick = make(chan struct{}, 1)
	}
	return l.kick
}

// Start syncs the listeners on every change until ctx ends, then closes
// them, letting requests in flight finish within ShutdownTimeout.
func (l *Listeners) Start(ctx context.Context) error {
	resync := l.Resync
	if resync <= 0 {
		resync = 10 * time.Second
	}
	kick := l.kicks()
	for {
		if err := l.Sync(ctx); err != nil {
			l.Log.Error(err, "syncing the listeners")
		}
		select {
		case <-ctx.Done():
			l.leave(kick)
			l.closeAll()
			return nil
		case <-kick:
		case <-time.After(resync):
		}
	}
}

// Ready is a readiness check: a replica is ready once it listens on the
// ports of the slices it found, so that the Function controller lists its
// address only where it answers.
func (l *Listeners) Ready(*http.Request) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.synced {
		return errors.New("the listeners have not opened the activator's ports yet")
	}
	return nil
}

// leave returns once no slice of ours lists Address and the nodes have had
// Settle to follow, or after Leave: until then connections still arrive
// here, and a closed port would refuse them. The settle applies even when
// the controller dropped the address before the signal: the nodes may not
// have followed yet. A replica with no port open returns at once.
func (l *Listeners) leave(kick <-chan struct{}) {
	l.mu.Lock()
	serving := len(l.open) > 0
	l.mu.Unlock()
	if l.Address == "" || !serving {
		return
	}
	bound, settle := l.Leave, l.Settle
	if bound <= 0 {
		bound = DefaultLeave
	}
	if settle <= 0 {
		settle = module.EndpointSettle
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	wasListed := false
	for {
		listed, err := l.listed(ctx)
		switch {
		case err != nil:
			l.Log.Error(err, "stopping: listing the activator's EndpointSlices")
		case len(listed) == 0:
			l.Log.Info("stopping: no EndpointSlice lists this replica any more; serving while the nodes follow", "address", l.Address, "settle", settle.String())
			select {
			case <-ctx.Done():
			case <-time.After(settle):
			}
			return
		case !wasListed:
			wasListed = true
			l.Log.Info("stopping: serving while EndpointSlices list this replica", "address", l.Address, "slices", len(listed))
		}
		select {
		case <-ctx.Done():
			l.Log.Info("stopping: EndpointSlices still list this replica; closing its ports", "address", l.Address, "after", bound.String(), "slices", listed)
			return
		case <-kick:
		case <-time.After(time.Second):
		}
	}
}

// listed names the slices of ours that list Address.
func (l *Listeners) listed(ctx context.Context) ([]string, error) {
	list, err := l.ours(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if slices.Contains(e.Addresses, l.Address) {
				names = append(names, s.Namespace+"/"+s.Name)
				break
			}
		}
	}
	return names, nil
}

// ours lists the EndpointSlices the Function controller made for parked
// Functions.
func (l *Listeners) ours(ctx context.Context) (*discoveryv1.EndpointSliceList, error) {
	list := &discoveryv1.EndpointSliceList{}
	if err := l.Cache.List(ctx, list, client.MatchingLabels{labelSliceOwner: module.ActivatorSliceManagedBy}); err != nil {
		return nil, fmt.Errorf("listing the activator's EndpointSlices: %w", err)
	}
	return list, nil
}

// Ports are the ports served now, for tests and logs.
func (l *Listeners) Ports() map[int32]types.NamespacedName {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int32]types.NamespacedName, len(l.open))
	for p, ln := range l.open {
		out[p] = ln.fn
	}
	return out
}

// Sync opens a listener for each port of our slices and closes the others.
// A port claimed by two Functions is served for neither: guessing would
// send one Function's requests to another.
func (l *Listeners) Sync(ctx context.Context) error {
	want, err := l.desired(ctx)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open == nil {
		l.open = map[int32]*listener{}
	}
	for port, ln := range l.open {
		if fn, ok := want[port]; !ok || fn != ln.fn {
			l.Log.Info("closing", "port", port, "function", ln.fn.String())
			// Requests in flight finish in the background; the port itself
			// is free before the next listener may take it.
			closed := make(chan struct{})
			ln.server.RegisterOnShutdown(func() { close(closed) })
			go l.shutdown(ln.server)
			<-closed
			delete(l.open, port)
		}
	}
	var errs []error
	for port, fn := range want {
		if _, ok := l.open[port]; ok {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(l.Host, strconv.Itoa(int(port))))
		if err != nil {
			errs = append(errs, fmt.Errorf("port %d of Function %s: %w", port, fn, err))
			continue
		}
		srv := &http.Server{Handler: l.Handler(fn), ReadHeaderTimeout: 30 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				l.Log.Error(err, "serving", "port", port, "function", fn.String())
			}
		}()
		l.open[port] = &listener{fn: fn, server: srv}
		l.Log.Info("listening", "port", port, "function", fn.String())
	}
	// A port that could not be opened is retried and logged; it does not
	// keep the replica's other Functions from being served.
	l.synced = true
	return errors.Join(errs...)
}

// desired maps each port of our slices to its Function, leaving out (and
// logging once) ports claimed by more than one Function and ports that
// are not ours to open.
func (l *Listeners) desired(ctx context.Context) (map[int32]types.NamespacedName, error) {
	list, err := l.ours(ctx)
	if err != nil {
		return nil, err
	}
	claims := map[int32][]types.NamespacedName{}
	for _, s := range list.Items {
		name := s.Labels[labelServiceName]
		port, ok := slicePort(&s)
		if name == "" || !ok {
			continue
		}
		fn := types.NamespacedName{Namespace: s.Namespace, Name: name}
		if !containsFn(claims[port], fn) {
			// Dual-stack: one slice per address family, same port.
			claims[port] = append(claims[port], fn)
		}
	}
	want := map[int32]types.NamespacedName{}
	refused := map[int32]string{}
	for port, fns := range claims {
		switch {
		case port < 1024 || port > 65535 || l.reserved(port):
			refused[port] = fmt.Sprintf("Function %s: port %d is not one the activator may open", fns[0], port)
		case len(fns) > 1:
			names := make([]string, len(fns))
			for i, fn := range fns {
				names[i] = fn.String()
			}
			sort.Strings(names)
			refused[port] = fmt.Sprintf("port %d is claimed by Functions %v: served for none", port, names)
		default:
			want[port] = fns[0]
		}
	}
	l.mu.Lock()
	for port, why := range refused {
		if l.refused[port] != why {
			l.Log.Error(nil, why, "port", port)
		}
	}
	l.refused = refused
	l.mu.Unlock()
	return want, nil
}

func (l *Listeners) reserved(port int32) bool {
	for _, r := range l.Reserved {
		if int32(r) == port {
			return true
		}
	}
	return false
}

func containsFn(fns []types.NamespacedName, fn types.NamespacedName) bool {
	for _, f := range fns {
		if f == fn {
			return true
		}
	}
	return false
}

// slicePort is the number of the slice's port named http.
func slicePort(s *discoveryv1.EndpointSlice) (int32, bool) {
	for _, p := range s.Ports {
		if p.Name != nil && *p.Name == SlicePortName && p.Port != nil {
			return *p.Port, true
		}
	}
	return 0, false
}

func (l *Listeners) shutdown(srv *http.Server) {
	timeout := l.ShutdownTimeout
	if timeout <= 0 {
		timeout = scaletozero.DefaultHoldTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
}

func (l *Listeners) closeAll() {
	l.mu.Lock()
	open := l.open
	l.open = nil
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, ln := range open {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.shutdown(ln.server)
		}()
	}
	wg.Wait()
}

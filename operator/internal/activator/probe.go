package activator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Forwarding on the first answer (docs/contributor/scale-to-zero.md,
// "Probing a Starting Replica"): while a wake waits, the activator probes
// the replicas that the Function's own EndpointSlices list as not ready yet,
// and the held requests go to the first that answers, without waiting for
// kubelet's probes, its status report and the slice's update.

const (
	// DefaultProbeEvery is how often a starting replica is probed: a
	// runtime listens 0.1-0.2 s after its container starts, and a refused
	// connection costs the activator microseconds.
	DefaultProbeEvery = 20 * time.Millisecond
	// DefaultProbeLimit bounds the probes of one replica in one wake (a
	// minute at DefaultProbeEvery, the default hold timeout): a replica
	// that never answers is left to kubelet's verdict.
	DefaultProbeLimit = 3000
	// probeTimeout bounds one probe: the replica is on the cluster's
	// network, and a runtime that answers /healthz at all answers in
	// milliseconds.
	probeTimeout = 500 * time.Millisecond
	// probedTrust is how long a replica that answered a probe serves new
	// requests before the cluster lists it as ready: about the time kubelet
	// takes to agree. Past it, a request waits for a new probe.
	probedTrust = 3 * time.Second
	// healthPath is the runtimes' health endpoint (docs/contributor/runtime-contract.md).
	healthPath = "/healthz"
)

// ProbeFunc tells whether the replica (its URL http://<address>:<port>)
// answers; nil means it does.
type ProbeFunc func(ctx context.Context, r Replica) error

// HTTPProbe asks the replica's health endpoint over c, expecting 200: what
// kubelet's startup and readiness probes ask of every Function's Pod. In
// mesh mode the request carries the replica's Authority, by which the
// activator's sidecar reaches it.
func HTTPProbe(c *http.Client) ProbeFunc {
	return func(ctx context.Context, r Replica) error {
		base := r.URL
		ctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.JoinPath(healthPath).String(), nil)
		if err != nil {
			return fmt.Errorf("probing %s: %w", base.Host, err)
		}
		req.Host = r.Authority
		resp, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("probing %s: %w", base.Host, err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<10))
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("probing %s: status %s", base.Host, resp.Status)
		}
		return nil
	}
}

// probeClient is the probes' own client: no connection is kept, so a
// probe leaves no idle connection to a Pod behind.
func probeClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableKeepAlives = true
	t.Proxy = nil
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// probed remembers, per Function, the replicas that answered a probe and
// when, until the cluster lists them as ready, they fail, or the trust ends.
type probed struct {
	mu sync.Mutex
	by map[types.NamespacedName]map[string]time.Time // URL → when it answered
}

func (p *probed) answered(fn types.NamespacedName, u *url.URL, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.by == nil {
		p.by = map[types.NamespacedName]map[string]time.Time{}
	}
	if p.by[fn] == nil {
		p.by[fn] = map[string]time.Time{}
	}
	p.by[fn][u.String()] = at
}

// failed forgets a replica that failed after it answered.
func (p *probed) failed(fn types.NamespacedName, u *url.URL) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.by[fn], u.String())
	if len(p.by[fn]) == 0 {
		delete(p.by, fn)
	}
}

// trusted returns the first of starting that answered less than
// probedTrust before now; it forgets the Function's answers that are too
// old or whose replica is no longer listed.
func (p *probed) trusted(fn types.NamespacedName, starting []Replica, now time.Time) (*url.URL, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := p.by[fn]
	if len(seen) == 0 {
		return nil, false
	}
	listed := map[string]*url.URL{}
	for _, r := range starting {
		listed[r.URL.String()] = r.URL
	}
	var found *url.URL
	for key, at := range seen {
		u, ok := listed[key]
		if !ok || now.Sub(at) >= probedTrust {
			delete(seen, key)
			continue
		}
		if found == nil || key < found.String() {
			found = u
		}
	}
	if len(seen) == 0 {
		delete(p.by, fn)
	}
	return found, found != nil
}

// probes runs one probe loop per starting replica of one wake and
// reports the first replica that answers.
type probes struct {
	probe   ProbeFunc
	every   time.Duration
	limit   int
	running map[string]context.CancelFunc
	first   chan *url.URL
}

func newProbes(probe ProbeFunc, every time.Duration, limit int) *probes {
	return &probes{probe: probe, every: every, limit: limit,
		running: map[string]context.CancelFunc{}, first: make(chan *url.URL, 1)}
}

// follow probes each of starting that is not probed yet and stops the
// probes of replicas no longer listed (gone, terminating or ready: a ready
// one is taken from the slices).
func (p *probes) follow(ctx context.Context, starting []Replica) {
	listed := map[string]bool{}
	for _, r := range starting {
		key := r.URL.String()
		listed[key] = true
		if _, ok := p.running[key]; ok {
			continue
		}
		pctx, cancel := context.WithCancel(ctx)
		p.running[key] = cancel
		go p.loop(pctx, r)
	}
	for key, cancel := range p.running {
		if !listed[key] {
			cancel()
			delete(p.running, key)
		}
	}
}

// loop probes r every p.every, at most p.limit times, until it answers
// or ctx ends.
func (p *probes) loop(ctx context.Context, r Replica) {
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for range p.limit {
		if p.probe(ctx, r) == nil {
			select {
			case p.first <- r.URL:
			default: // another replica answered first
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (p *probes) stop() {
	for _, cancel := range p.running {
		cancel()
	}
}

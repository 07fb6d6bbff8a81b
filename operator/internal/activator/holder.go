package activator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// Waker asks for a replica of a Function at zero. Wake returns once the
// request is made, not once a replica is ready, and does nothing for a
// Function that already asks for replicas.
type Waker interface {
	Wake(ctx context.Context, fn types.NamespacedName) error
}

// Replicas tells where a Function's ready replicas are.
type Replicas interface {
	// Ready returns a ready replica's base URL (http://<Pod IP>:8080)
	// without waiting.
	Ready(fn types.NamespacedName) (*url.URL, bool)
	// Await waits for a ready replica and returns its base URL. It
	// returns a *Failure as soon as the Function reports that none will
	// become ready, and ctx's error when ctx ends first.
	Await(ctx context.Context, fn types.NamespacedName) (*url.URL, error)
	// Failed is told of a replica that forwarding could not reach, so
	// that it is not chosen again on the strength of an earlier answer.
	Failed(fn types.NamespacedName, replica *url.URL)
}

// Timeouts tells how long a Function's requests are held while it wakes.
type Timeouts interface {
	// HoldTimeout is fn's hold timeout, def unless the Function sets its
	// own.
	HoldTimeout(fn types.NamespacedName, def time.Duration) time.Duration
}

// FailureRecorder reports a failed wake where the Function's owner sees
// it (an event on the Function).
type FailureRecorder interface {
	WakeFailed(fn types.NamespacedName, f *Failure)
}

// FailureReason says why a held request is answered 503. Users see it in
// the 503 and in the Function's events; the values are the Function API's
// reasons, each with its troubleshooting guide.
type FailureReason string

const (
	WakeFailed  FailureReason = v1alpha2.ReasonWakeFailed
	StartFailed FailureReason = v1alpha2.ReasonStartFailed
	WakeTimeout FailureReason = v1alpha2.ReasonWakeTimeout
)

// Failure is why a Function could not be woken.
type Failure struct {
	Reason FailureReason
	// Cause is a short word from the Function's status (such as a
	// condition's reason), safe to show any caller; may be empty.
	Cause string
	// Detail is for the Function's owner only (events, logs): it may name
	// images, Pods or service accounts, so it never goes into a response.
	Detail string
}

func (f *Failure) Error() string {
	msg := string(f.Reason)
	if f.Cause != "" {
		msg += " (" + f.Cause + ")"
	}
	if f.Detail != "" {
		msg += ": " + f.Detail
	}
	return msg
}

// DefaultFailureBackoff is how long a failed wake answers new requests
// when Options.FailureBackoff is zero.
const DefaultFailureBackoff = 5 * time.Second

// Options of a Holder.
type Options struct {
	// Timeout bounds how long a request is held; scaletozero.DefaultHoldTimeout if zero.
	Timeout time.Duration
	// FailureBackoff is how long after a failed wake (other than a
	// timeout) new requests get its 503 at once instead of starting
	// another wake: a Function that cannot start, under load, must not
	// cost a scale request and an event per request.
	// DefaultFailureBackoff if zero.
	FailureBackoff time.Duration
	// Transport forwards to the replicas; a clone of
	// http.DefaultTransport if nil.
	Transport http.RoundTripper
	// Registerer gets the Holder's metrics; none are registered if nil.
	Registerer prometheus.Registerer
	// Recorder is told of failed wakes; may be nil.
	Recorder FailureRecorder
	// Timeouts sets a Function's own hold timeout; Timeout for all if nil.
	Timeouts Timeouts
	// Authority is the Host of a request forwarded to a Function's replica
	// (mesh mode: scaletozero.MeshAuthority, which the activator's sidecar
	// routes by); nil or "" keeps the caller's Host.
	Authority func(fn types.NamespacedName) string
}

// Holder answers requests for Functions: at once by forwarding to a ready
// replica, or, when there is none, by holding them while one wake of the
// Function runs for all of them, then forwarding them or answering 503.
type Holder struct {
	waker    Waker
	replicas Replicas
	recorder FailureRecorder
	timeouts Timeouts
	timeout  time.Duration
	backoff  time.Duration
	proxy    *httputil.ReverseProxy
	metrics  holderMetrics
	// authority names a Function's replicas in forwarded requests (nil: the caller's Host).
	authority func(types.NamespacedName) string

	mu       sync.Mutex
	attempts map[types.NamespacedName]*attempt
}

// attempt is one wake of a Function, bounded by timeout; done closes when
// target or failure is set. A failed attempt answers until retryAt.
type attempt struct {
	timeout time.Duration
	done    chan struct{}
	target  *url.URL
	failure *Failure
	retryAt time.Time
}

type holderMetrics struct {
	held     prometheus.Gauge
	requests *prometheus.CounterVec
	wake     *prometheus.HistogramVec
}

// Outcomes of a request, the label of serverless_activator_requests_total.
const (
	outcomeForwarded    = "forwarded"
	outcomeWokenForward = "forwarded_after_wake"
	outcomeUnavailable  = "unavailable"
	outcomeClientGone   = "client_gone"
)

// Results of a wake, the label of serverless_activator_wake_duration_seconds.
const (
	wakeResultReady   = "ready"
	wakeResultFailed  = "failed"
	wakeResultTimeout = "timeout"
)

// HeaderReason carries a 503's reason for clients that branch on it.
const HeaderReason = module.ActivatorReasonHeader

// NewHolder builds a Holder; it fails only when its metrics cannot be
// registered.
func NewHolder(waker Waker, replicas Replicas, opts Options) (*Holder, error) {
	h := &Holder{
		waker:     waker,
		replicas:  replicas,
		recorder:  opts.Recorder,
		timeouts:  opts.Timeouts,
		timeout:   opts.Timeout,
		backoff:   opts.FailureBackoff,
		attempts:  map[types.NamespacedName]*attempt{},
		authority: opts.Authority,
		metrics: holderMetrics{
			held: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "serverless_activator_requests_held",
				Help: "Requests held while their Function is woken.",
			}),
			requests: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "serverless_activator_requests_total",
				Help: "Requests the activator answered, by outcome: forwarded at once, forwarded after a wake, unavailable (503), client gone while held.",
			}, []string{"outcome"}),
			wake: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Name:    "serverless_activator_wake_duration_seconds",
				Help:    "Time from a wake's first held request until a replica was ready (result ready) or the wake gave up (failed, timeout).",
				Buckets: []float64{0.25, 0.5, 1, 2, 3, 5, 8, 13, 20, 30, 45, 60, 90, 120},
			}, []string{"result"}),
		},
	}
	if h.timeout <= 0 {
		h.timeout = scaletozero.DefaultHoldTimeout
	}
	if h.backoff <= 0 {
		h.backoff = DefaultFailureBackoff
	}
	transport := opts.Transport
	if transport == nil {
		transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	h.proxy = &httputil.ReverseProxy{
		Rewrite:      rewrite,
		Transport:    transport,
		ErrorHandler: h.forwardFailed,
	}
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{h.metrics.held, h.metrics.requests, h.metrics.wake} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("registering the activator's metrics: %w", err)
			}
		}
	}
	return h, nil
}

// Handler answers the requests for one Function.
func (h *Holder) Handler(fn types.NamespacedName) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.serve(w, r, fn)
	})
}

func (h *Holder) serve(w http.ResponseWriter, r *http.Request, fn types.NamespacedName) {
	if target, ok := h.replicas.Ready(fn); ok {
		h.metrics.requests.WithLabelValues(outcomeForwarded).Inc()
		h.forward(w, r, fn, target)
		return
	}
	a := h.join(fn)
	h.metrics.held.Inc()
	select {
	case <-a.done:
		h.metrics.held.Dec()
	case <-r.Context().Done():
		// Nobody is left to answer; the wake goes on for the others.
		h.metrics.held.Dec()
		h.metrics.requests.WithLabelValues(outcomeClientGone).Inc()
		return
	}
	if a.failure != nil {
		h.metrics.requests.WithLabelValues(outcomeUnavailable).Inc()
		unavailable(w, fn, a.failure, a.timeout)
		return
	}
	h.metrics.requests.WithLabelValues(outcomeWokenForward).Inc()
	h.forward(w, r, fn, a.target)
}

// join returns the Function's running wake, or its recent failure, or
// starts a wake: concurrent requests share a single wake.
func (h *Holder) join(fn types.NamespacedName) *attempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a, ok := h.attempts[fn]; ok && (a.retryAt.IsZero() || time.Now().Before(a.retryAt)) {
		return a
	}
	a := &attempt{done: make(chan struct{}), timeout: h.timeout}
	if h.timeouts != nil {
		a.timeout = h.timeouts.HoldTimeout(fn, h.timeout)
	}
	h.attempts[fn] = a
	go h.wake(fn, a)
	return a
}

// wake runs one attempt to its end. It is bound by the timeout alone, not
// by any request: held requests come and go, the wake serves the next.
func (h *Holder) wake(fn types.NamespacedName, a *attempt) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	target, failure := h.tryWake(ctx, fn, a.timeout)
	result := wakeResultReady
	if failure != nil {
		result = wakeResultFailed
		if failure.Reason == WakeTimeout {
			result = wakeResultTimeout
		}
		if h.recorder != nil {
			h.recorder.WakeFailed(fn, failure)
		}
	}
	h.metrics.wake.WithLabelValues(result).Observe(time.Since(start).Seconds())
	h.mu.Lock()
	a.target, a.failure = target, failure
	if failure != nil && failure.Reason != WakeTimeout {
		a.retryAt = time.Now().Add(h.backoff)
		// Forgotten after the backoff, so Functions deleted meanwhile
		// leave nothing behind.
		time.AfterFunc(h.backoff, func() { h.forget(fn, a) })
	} else {
		// Requests from now on find the replica ready or start a new
		// wake; after a timeout the replica may be close.
		delete(h.attempts, fn)
	}
	close(a.done)
	h.mu.Unlock()
}

// forget drops a finished attempt unless a newer one replaced it.
func (h *Holder) forget(fn types.NamespacedName, a *attempt) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.attempts[fn] == a {
		delete(h.attempts, fn)
	}
}

func (h *Holder) tryWake(ctx context.Context, fn types.NamespacedName, timeout time.Duration) (*url.URL, *Failure) {
	if err := h.waker.Wake(ctx, fn); err != nil {
		return nil, failure(ctx, WakeFailed, timeout, fmt.Errorf("asking for a replica: %w", err))
	}
	target, err := h.replicas.Await(ctx, fn)
	if err != nil {
		return nil, failure(ctx, StartFailed, timeout, fmt.Errorf("waiting for a ready replica: %w", err))
	}
	if target == nil {
		return nil, &Failure{Reason: StartFailed, Detail: "a ready replica was reported without an address"}
	}
	return target, nil
}

// failure turns err into a Failure: the one it wraps, a timeout when the
// wake ran out of time, else reason.
func failure(ctx context.Context, reason FailureReason, timeout time.Duration, err error) *Failure {
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Failure{Reason: WakeTimeout, Detail: fmt.Sprintf("no replica ready within %s: %v", timeout, err)}
	}
	return &Failure{Reason: reason, Detail: err.Error()}
}

type targetKey struct{}

type forwardTo struct {
	fn     types.NamespacedName
	target *url.URL
	// authority replaces the caller's Host ("": kept).
	authority string
}

func (h *Holder) forward(w http.ResponseWriter, r *http.Request, fn types.NamespacedName, target *url.URL) {
	to := forwardTo{fn: fn, target: target}
	if h.authority != nil {
		to.authority = h.authority(fn)
	}
	ctx := context.WithValue(r.Context(), targetKey{}, to)
	h.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// rewrite sends the request to the replica as the Service would have: the
// same Host, path, query, headers and body. ReverseProxy drops the
// forwarding headers before Rewrite; a caller's or gateway's are put back.
// In mesh mode the Host names the Function's private Service, and the
// caller's Host goes in X-Forwarded-Host unless the caller set one.
func rewrite(pr *httputil.ProxyRequest) {
	to := pr.In.Context().Value(targetKey{}).(forwardTo)
	pr.SetURL(to.target)
	pr.Out.Host = pr.In.Host
	for _, name := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		if v, ok := pr.In.Header[name]; ok {
			pr.Out.Header[name] = v
		}
	}
	if to.authority != "" {
		if _, ok := pr.In.Header["X-Forwarded-Host"]; !ok {
			pr.Out.Header.Set("X-Forwarded-Host", pr.In.Host)
		}
		pr.Out.Host = to.authority
	}
}

func (h *Holder) forwardFailed(w http.ResponseWriter, r *http.Request, err error) {
	to, _ := r.Context().Value(targetKey{}).(forwardTo)
	if to.target != nil && r.Context().Err() == nil {
		// The replica did not answer (the caller is still there): its
		// container may have gone since it was chosen.
		h.replicas.Failed(to.fn, to.target)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusBadGateway)
	// The error names the replica's address only, which the caller's
	// Service would have reached anyway.
	_, _ = fmt.Fprintf(w, "Function %s: forwarding to its replica failed: %v\n", to.fn, err)
}

// unavailable answers 503 with the reason in the body, for any caller:
// the Failure's Detail stays out of it.
func unavailable(w http.ResponseWriter, fn types.NamespacedName, f *Failure, timeout time.Duration) {
	why := map[FailureReason]string{
		WakeFailed:  "it is scaled to zero and could not be scaled up",
		StartFailed: "its replicas cannot start",
		WakeTimeout: "no replica became ready within " + timeout.String(),
	}[f.Reason]
	if why == "" {
		why = "it could not be woken"
	}
	reason := string(f.Reason)
	if f.Cause != "" {
		reason += ": " + f.Cause
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set(HeaderReason, string(f.Reason))
	if f.Reason == WakeTimeout {
		// The replica may still come: worth a try later.
		w.Header().Set("Retry-After", strconv.Itoa(int(min(timeout, 30*time.Second).Seconds())))
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = fmt.Fprintf(w, "Function %s is unavailable (%s): %s. Its owner finds the details in the Function's events.\n", fn, reason, why)
}

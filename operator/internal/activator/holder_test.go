package activator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

var hello = types.NamespacedName{Namespace: "default", Name: "hello"}

// fakeWaker counts wakes and answers each with err.
type fakeWaker struct {
	calls atomic.Int32
	err   error
}

func (f *fakeWaker) Wake(ctx context.Context, fn types.NamespacedName) error {
	f.calls.Add(1)
	return f.err
}

// fakeReplicas has a ready replica once the test sets one, or a failure
// once the test reports one; Await wakes on either.
type fakeReplicas struct {
	mu      sync.Mutex
	ready   *url.URL
	failure error
	failed  []string
	changed chan struct{}
}

func newFakeReplicas() *fakeReplicas { return &fakeReplicas{changed: make(chan struct{})} }

func (f *fakeReplicas) set(ready *url.URL, failure error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ready, f.failure = ready, failure
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeReplicas) Ready(fn types.NamespacedName) (*url.URL, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready, f.ready != nil
}

// Failed forgets the ready replica when it is the one that failed.
func (f *fakeReplicas) Failed(fn types.NamespacedName, replica *url.URL) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = append(f.failed, replica.String())
	if f.ready != nil && f.ready.String() == replica.String() {
		f.ready = nil
	}
}

func (f *fakeReplicas) Await(ctx context.Context, fn types.NamespacedName) (*url.URL, error) {
	for {
		f.mu.Lock()
		ready, failure, changed := f.ready, f.failure, f.changed
		f.mu.Unlock()
		if ready != nil || failure != nil {
			return ready, failure
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("0 of 1 replicas ready: %w", ctx.Err())
		}
	}
}

// recorder keeps the failures reported.
type recorder struct {
	mu       sync.Mutex
	failures []Failure
}

func (r *recorder) WakeFailed(fn types.NamespacedName, f *Failure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, *f)
}

func (r *recorder) seen() []Failure {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Failure(nil), r.failures...)
}

// echo is a replica that answers with what it received.
func echo(t *testing.T) (*httptest.Server, *url.URL) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sum := sha256.Sum256(body)
		w.Header().Set("X-Seen-Host", r.Host)
		w.Header().Set("X-Seen-Uri", r.URL.RequestURI())
		w.Header().Set("X-Seen-Method", r.Method)
		w.Header().Set("X-Seen-Forwarded-For", strings.Join(r.Header.Values("X-Forwarded-For"), ","))
		w.Header().Set("X-Seen-Custom", r.Header.Get("X-Custom"))
		w.Header().Set("X-Seen-Sha256", hex.EncodeToString(sum[:]))
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return srv, u
}

type harness struct {
	holder   *Holder
	waker    *fakeWaker
	replicas *fakeReplicas
	recorder *recorder
	registry *prometheus.Registry
	front    *httptest.Server
	client   *http.Client
}

func newHarness(t *testing.T, timeout time.Duration, wakeErr error) *harness {
	return newHarnessBackoff(t, timeout, time.Hour, wakeErr)
}

func newHarnessBackoff(t *testing.T, timeout, backoff time.Duration, wakeErr error) *harness {
	t.Helper()
	h := &harness{
		waker:    &fakeWaker{err: wakeErr},
		replicas: newFakeReplicas(),
		recorder: &recorder{},
		registry: prometheus.NewRegistry(),
	}
	var err error
	h.holder, err = NewHolder(h.waker, h.replicas, Options{
		Timeout: timeout, FailureBackoff: backoff, Registerer: h.registry, Recorder: h.recorder,
	})
	require.NoError(t, err)
	h.front = httptest.NewServer(h.holder.Handler(hello))
	t.Cleanup(h.front.Close)
	// Runs before Close: a test that failed with requests still held
	// releases them, so Close does not wait for the hold timeout.
	t.Cleanup(func() { h.replicas.set(nil, errors.New("the test is over")) })
	// Every request of a test ends within this deadline or fails it.
	h.client = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: 100}}
	t.Cleanup(h.client.CloseIdleConnections)
	return h
}

// waitFor polls cond until it holds or 10 s passed; the failure says what
// was last seen.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		done, seen := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			require.Failf(t, "timed out", "waiting 10 s for %s; last seen: %s", what, seen)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) heldAre(t *testing.T, n int) func() (bool, string) {
	return func() (bool, string) {
		held := value(t, h.holder.metrics.held)
		return int(held) == n, fmt.Sprintf("%v requests held, %d wakes", held, h.waker.calls.Load())
	}
}

type answer struct {
	status int
	header http.Header
	body   string
	err    error
}

func (h *harness) send(ctx context.Context, method, path string, body []byte, header http.Header) answer {
	req, err := http.NewRequestWithContext(ctx, method, h.front.URL+path, bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := h.client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, header: res.Header, body: string(got), err: err}
}

func TestHolderHoldsConcurrentRequestsUntilReady(t *testing.T) {
	const n = 100
	h := newHarness(t, time.Hour, nil)
	_, replica := echo(t)

	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			answers[i] = h.send(context.Background(), http.MethodPost, fmt.Sprintf("/call/%d?i=%d", i, i), []byte(fmt.Sprintf("request %d", i)), nil)
		})
	}
	waitFor(t, fmt.Sprintf("%d requests held and one wake", n), func() (bool, string) {
		done, seen := h.heldAre(t, n)()
		return done && h.waker.calls.Load() == 1, seen
	})
	h.replicas.set(replica, nil)
	wg.Wait()

	for i, a := range answers {
		require.NoError(t, a.err, "request %d", i)
		assert.Equal(t, http.StatusOK, a.status, "request %d: %s", i, a.body)
		assert.Equal(t, fmt.Sprintf("request %d", i), a.body, "request %d reached the replica with its own body", i)
		assert.Equal(t, fmt.Sprintf("/call/%d?i=%d", i, i), a.header.Get("X-Seen-Uri"))
	}
	assert.Equal(t, int32(1), h.waker.calls.Load(), "one wake for all held requests")
	assert.Equal(t, 0.0, value(t, h.holder.metrics.held))
	assert.Equal(t, float64(n), value(t, h.holder.metrics.requests.WithLabelValues(outcomeWokenForward)))
	assert.Equal(t, 1, histogramCount(t, h.registry, wakeResultReady))
	assert.Empty(t, h.recorder.seen())

	// Ready now: the next request goes straight through, without a wake.
	a := h.send(context.Background(), http.MethodGet, "/again", nil, nil)
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusOK, a.status)
	assert.Equal(t, int32(1), h.waker.calls.Load())
	assert.Equal(t, 1.0, value(t, h.holder.metrics.requests.WithLabelValues(outcomeForwarded)))
}

// value reads a gauge or a counter.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	require.NoError(t, m.Write(&out))
	if out.Gauge != nil {
		return out.GetGauge().GetValue()
	}
	return out.GetCounter().GetValue()
}

// histogramCount is how many wakes the registry counts with result.
func histogramCount(t *testing.T, reg *prometheus.Registry, result string) int {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "serverless_activator_wake_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return int(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return 0
}

func TestHolderForwardsIntact(t *testing.T) {
	binary := make([]byte, 1<<20)
	for i := range binary {
		binary[i] = byte(i * 7)
	}
	tests := []struct {
		name   string
		method string
		path   string
		body   []byte
		header http.Header
		// ready: the replica is ready before the request comes.
		ready bool
	}{
		{name: "JSON body after a wake", method: http.MethodPost, path: "/", body: []byte(`{"hello":"world"}`),
			header: http.Header{"Content-Type": {"application/json"}}},
		{name: "1 MiB binary body after a wake", method: http.MethodPut, path: "/upload?x=1&y=2", body: binary},
		{name: "empty body after a wake", method: http.MethodGet, path: "/path/with%20space?q=a+b"},
		{name: "body to a ready replica", method: http.MethodPatch, path: "/p", body: []byte("patch me"), ready: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, time.Hour, nil)
			_, replica := echo(t)
			if tt.ready {
				h.replicas.set(replica, nil)
			}
			header := http.Header{"X-Custom": {"kept"}, "X-Forwarded-For": {"203.0.113.7"}}
			for k, v := range tt.header {
				header[k] = v
			}
			done := make(chan answer, 1)
			go func() { done <- h.send(context.Background(), tt.method, tt.path, tt.body, header) }()
			if !tt.ready {
				waitFor(t, "the request held", h.heldAre(t, 1))
				h.replicas.set(replica, nil)
			}
			a := <-done
			require.NoError(t, a.err)
			require.Equal(t, http.StatusOK, a.status, a.body)
			want := sha256.Sum256(tt.body)
			assert.Equal(t, hex.EncodeToString(want[:]), a.header.Get("X-Seen-Sha256"), "the body arrived byte for byte")
			assert.Equal(t, len(tt.body), len(a.body))
			assert.Equal(t, tt.method, a.header.Get("X-Seen-Method"))
			assert.Equal(t, tt.path, a.header.Get("X-Seen-Uri"))
			assert.Equal(t, strings.TrimPrefix(h.front.URL, "http://"), a.header.Get("X-Seen-Host"), "the Host the caller used")
			assert.Equal(t, "kept", a.header.Get("X-Seen-Custom"))
			assert.Equal(t, "203.0.113.7", a.header.Get("X-Seen-Forwarded-For"), "forwarding headers as the caller sent them")
			wakes := int32(1)
			if tt.ready {
				wakes = 0
			}
			assert.Equal(t, wakes, h.waker.calls.Load())
		})
	}
}

func TestHolderAnswers503WithTheReason(t *testing.T) {
	secretish := `functions.serverless.kyma-project.io "hello" is forbidden: User "system:serviceaccount:kyma-system:serverless-activator"`
	tests := []struct {
		name    string
		timeout time.Duration
		wakeErr error
		// reported is what the Function reports while the request is held.
		reported   error
		wantReason FailureReason
		wantCause  string
		wantBody   []string
		wantDetail string
		// wantResult is the wake's result label.
		wantResult string
	}{
		{
			name: "the wake is refused: at once", timeout: time.Hour, wakeErr: errors.New(secretish),
			wantReason: WakeFailed, wantBody: []string{"(WakeFailed)", "could not be scaled up"},
			wantDetail: secretish, wantResult: wakeResultFailed,
		},
		{
			name: "the replicas cannot start: at once", timeout: time.Hour,
			reported:   &Failure{Reason: StartFailed, Cause: "ImagePullBackOff", Detail: `Back-off pulling image "registry.internal/secret-project/hello"`},
			wantReason: StartFailed, wantCause: "ImagePullBackOff",
			wantBody:   []string{"(StartFailed: ImagePullBackOff)", "its replicas cannot start"},
			wantDetail: "registry.internal/secret-project/hello", wantResult: wakeResultFailed,
		},
		{
			name: "another error while waiting", timeout: time.Hour, reported: errors.New("the Function was deleted"),
			wantReason: StartFailed, wantBody: []string{"(StartFailed)"},
			wantDetail: "waiting for a ready replica: the Function was deleted", wantResult: wakeResultFailed,
		},
		{
			name: "no replica in time, the Function says why", timeout: time.Hour,
			reported: &Failure{Reason: WakeTimeout, Cause: "ReplicaUnschedulable: 0/4 nodes are available: 1 Insufficient cpu.",
				Detail: "no replica ready within the hold timeout: Deployment hello-x: Pod hello-x-y is not placed: 0/4 nodes are available: 1 Insufficient cpu."},
			wantReason: WakeTimeout, wantCause: "ReplicaUnschedulable: 0/4 nodes are available: 1 Insufficient cpu.",
			wantBody:   []string{"(WakeTimeout: ReplicaUnschedulable: 0/4 nodes are available: 1 Insufficient cpu.)"},
			wantDetail: "Pod hello-x-y", wantResult: wakeResultTimeout,
		},
		{
			name: "no replica in time", timeout: 200 * time.Millisecond,
			wantReason: WakeTimeout, wantBody: []string{"(WakeTimeout)", "no replica became ready within 200ms"},
			wantDetail: "no replica ready within 200ms: waiting for a ready replica: 0 of 1 replicas ready", wantResult: wakeResultTimeout,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.timeout, tt.wakeErr)
			const n = 5
			answers := make([]answer, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { answers[i] = h.send(context.Background(), http.MethodPost, "/", []byte("x"), nil) })
			}
			if tt.reported != nil {
				waitFor(t, "the requests held", h.heldAre(t, n))
				h.replicas.set(nil, tt.reported)
			}
			// A wake that fails answers within the client's deadline, not
			// after the hour-long hold timeout.
			wg.Wait()

			for i, a := range answers {
				require.NoError(t, a.err, "request %d", i)
				assert.Equal(t, http.StatusServiceUnavailable, a.status, "request %d", i)
				assert.Equal(t, string(tt.wantReason), a.header.Get(HeaderReason))
				assert.Equal(t, "text/plain; charset=utf-8", a.header.Get("Content-Type"))
				assert.Contains(t, a.body, "Function default/hello is unavailable")
				for _, part := range tt.wantBody {
					assert.Contains(t, a.body, part)
				}
				assert.NotContains(t, a.body, tt.wantDetail, "details stay out of the answer to any caller")
			}
			if tt.wantReason == WakeTimeout {
				assert.NotEmpty(t, answers[0].header.Get("Retry-After"))
			} else {
				assert.Empty(t, answers[0].header.Get("Retry-After"))
			}
			failures := h.recorder.seen()
			require.Len(t, failures, 1, "one failed wake reported for %d requests", n)
			assert.Equal(t, tt.wantReason, failures[0].Reason)
			assert.Equal(t, tt.wantCause, failures[0].Cause)
			assert.Contains(t, failures[0].Detail, tt.wantDetail)
			assert.Equal(t, int32(1), h.waker.calls.Load())
			assert.Equal(t, float64(n), value(t, h.holder.metrics.requests.WithLabelValues(outcomeUnavailable)))
			assert.Equal(t, 1, histogramCount(t, h.registry, tt.wantResult))
		})
	}
}

func TestHolderWakesAgainAfterAFailure(t *testing.T) {
	// A backoff that has passed by the next request.
	h := newHarnessBackoff(t, time.Hour, time.Nanosecond, nil)
	_, replica := echo(t)

	done := make(chan answer, 1)
	go func() { done <- h.send(context.Background(), http.MethodGet, "/", nil, nil) }()
	waitFor(t, "the first request held", h.heldAre(t, 1))
	h.replicas.set(nil, &Failure{Reason: StartFailed, Cause: "CrashLoopBackOff"})
	first := <-done
	require.NoError(t, first.err)
	assert.Equal(t, http.StatusServiceUnavailable, first.status)

	// The Function is fixed: the next request wakes it again and is served.
	h.replicas.set(nil, nil)
	go func() { done <- h.send(context.Background(), http.MethodPost, "/", []byte("second"), nil) }()
	waitFor(t, "the second request held", h.heldAre(t, 1))
	h.replicas.set(replica, nil)
	second := <-done
	require.NoError(t, second.err)
	assert.Equal(t, http.StatusOK, second.status)
	assert.Equal(t, "second", second.body)
	assert.Equal(t, int32(2), h.waker.calls.Load())
}

// fixedTimeouts gives every Function the same hold timeout.
type fixedTimeouts time.Duration

func (f fixedTimeouts) HoldTimeout(types.NamespacedName, time.Duration) time.Duration {
	return time.Duration(f)
}

func TestHolderHoldsForTheFunctionsOwnTimeout(t *testing.T) {
	holder, err := NewHolder(&fakeWaker{}, newFakeReplicas(), Options{Timeout: time.Hour, Timeouts: fixedTimeouts(300 * time.Millisecond)})
	require.NoError(t, err)
	front := httptest.NewServer(holder.Handler(hello))
	t.Cleanup(front.Close)
	client := &http.Client{Timeout: 20 * time.Second}
	start := time.Now()
	res, err := client.Get(front.URL)
	require.NoError(t, err)
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.Equal(t, string(WakeTimeout), res.Header.Get(HeaderReason))
	assert.Contains(t, string(body), "no replica became ready within 300ms", "the Function's own timeout, not the activator's hour")
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestHolderClientGoneWhileHeld(t *testing.T) {
	h := newHarness(t, time.Hour, nil)
	_, replica := echo(t)

	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan answer, 1)
	go func() { gone <- h.send(ctx, http.MethodGet, "/", nil, nil) }()
	waitFor(t, "the request held", h.heldAre(t, 1))
	cancel()
	a := <-gone
	require.ErrorIs(t, a.err, context.Canceled)
	waitFor(t, "the gone client counted", func() (bool, string) {
		n := value(t, h.holder.metrics.requests.WithLabelValues(outcomeClientGone))
		return n == 1, fmt.Sprintf("%v gone, %v held", n, value(t, h.holder.metrics.held))
	})
	assert.Equal(t, 0.0, value(t, h.holder.metrics.held))

	// The wake went on: a later request joins it and is served.
	done := make(chan answer, 1)
	go func() { done <- h.send(context.Background(), http.MethodGet, "/", nil, nil) }()
	waitFor(t, "the next request held", h.heldAre(t, 1))
	h.replicas.set(replica, nil)
	next := <-done
	require.NoError(t, next.err)
	assert.Equal(t, http.StatusOK, next.status)
	assert.Equal(t, int32(1), h.waker.calls.Load())
}

func TestHolderReplicaGoneWhileForwarding(t *testing.T) {
	h := newHarness(t, time.Hour, nil)
	srv, replica := echo(t)
	srv.Close()
	h.replicas.set(replica, nil)

	a := h.send(context.Background(), http.MethodGet, "/", nil, nil)
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusBadGateway, a.status)
	assert.Contains(t, a.body, "Function default/hello: forwarding to its replica failed")
	h.replicas.mu.Lock()
	defer h.replicas.mu.Unlock()
	assert.Equal(t, []string{replica.String()}, h.replicas.failed, "the replica that did not answer is reported")
}

func TestNewHolderMetricsRegisteredTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := NewHolder(&fakeWaker{}, newFakeReplicas(), Options{Registerer: reg})
	require.NoError(t, err)
	_, err = NewHolder(&fakeWaker{}, newFakeReplicas(), Options{Registerer: reg})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "registering the activator's metrics")
}

func TestHolderFailureBackoff(t *testing.T) {
	h := newHarness(t, time.Hour, errors.New("forbidden"))
	for i := range 3 {
		a := h.send(context.Background(), http.MethodGet, "/", nil, nil)
		require.NoError(t, a.err)
		assert.Equal(t, http.StatusServiceUnavailable, a.status, "request %d", i)
		assert.Equal(t, string(WakeFailed), a.header.Get(HeaderReason), "request %d", i)
	}
	assert.Equal(t, int32(1), h.waker.calls.Load(), "requests within the backoff start no wake")
	assert.Len(t, h.recorder.seen(), 1)
}

func TestHolderNoBackoffAfterATimeout(t *testing.T) {
	h := newHarness(t, 50*time.Millisecond, nil)
	for i := range 2 {
		a := h.send(context.Background(), http.MethodGet, "/", nil, nil)
		require.NoError(t, a.err)
		assert.Equal(t, string(WakeTimeout), a.header.Get(HeaderReason), "request %d", i)
	}
	assert.Equal(t, int32(2), h.waker.calls.Load(), "each request after a timeout wakes again")
}

func TestHolderForgetsFailuresAfterTheBackoff(t *testing.T) {
	h := newHarnessBackoff(t, time.Hour, time.Millisecond, errors.New("not found"))
	a := h.send(context.Background(), http.MethodGet, "/", nil, nil)
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusServiceUnavailable, a.status)
	waitFor(t, "the failed wake forgotten", func() (bool, string) {
		h.holder.mu.Lock()
		defer h.holder.mu.Unlock()
		return len(h.holder.attempts) == 0, fmt.Sprintf("%d attempts kept", len(h.holder.attempts))
	})
}

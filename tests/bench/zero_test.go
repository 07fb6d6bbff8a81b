package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

func TestSummarize(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	twenty := ms(20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
	tests := []struct {
		name string
		in   []time.Duration
		want summary
	}{
		{"none", nil, summary{}},
		{"one", ms(7), summary{n: 1, p50: 7 * time.Millisecond, p95: 7 * time.Millisecond, p99: 7 * time.Millisecond, min: 7 * time.Millisecond, max: 7 * time.Millisecond}},
		{"twenty, unsorted: nearest rank", twenty, summary{n: 20, p50: 10 * time.Millisecond, p95: 19 * time.Millisecond, p99: 20 * time.Millisecond, min: time.Millisecond, max: 20 * time.Millisecond}},
		{"fifteen", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), summary{n: 15, p50: 8 * time.Millisecond, p95: 15 * time.Millisecond, p99: 15 * time.Millisecond, min: time.Millisecond, max: 15 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, summarize(tt.in))
		})
	}
	assert.Equal(t, 20*time.Millisecond, twenty[0], "the input is left as it was")
}

func TestMomentsPhases(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	d := func(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }
	tests := []struct {
		name string
		m    moments
		want map[string]time.Duration
	}{
		{"every moment seen", moments{at(40), at(50), at(850), at(950), at(990), at(1900)},
			map[string]time.Duration{zeroPhases[0]: d(40), zeroPhases[1]: d(10), zeroPhases[2]: d(800), zeroPhases[3]: d(100), zeroPhases[4]: d(40), zeroReadyRow: d(1900)}},
		{"not scheduled apart: the sandbox phase holds it", moments{at(40), {}, at(850), at(950), at(990), {}},
			map[string]time.Duration{zeroPhases[0]: d(40), zeroPhases[2]: d(810), zeroPhases[3]: d(100), zeroPhases[4]: d(40)}},
		{"the probe saw the runtime after the answer", moments{at(40), at(50), at(850), at(1000), at(990), at(1900)},
			map[string]time.Duration{zeroPhases[0]: d(40), zeroPhases[1]: d(10), zeroPhases[2]: d(800), zeroPhases[4]: d(140), zeroReadyRow: d(1900)}},
		{"a moment out of order", moments{at(40), at(30), at(850), {}, at(990), {}},
			map[string]time.Duration{zeroPhases[0]: d(40), zeroPhases[2]: d(810), zeroPhases[4]: d(140)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.m.phases(start))
		})
	}
}

func TestOutcome(t *testing.T) {
	tests := []struct {
		name string
		in   []answer
		want string
	}{
		{"all answered", []answer{{after: 2 * time.Second}, {after: time.Second}, {after: 3 * time.Second}},
			"3 of 3 answered 200; p50 2.00 s, p95 3.00 s, the last answer after 3.00 s"},
		{"failures by kind, the most frequent first", []answer{{after: time.Second}, {after: 60 * time.Second, failure: "HTTP 503"}, {after: 61 * time.Second, failure: "HTTP 503"}, {after: 2 * time.Second, failure: "reset"}},
			"1 of 4 answered 200; p50 1.00 s, p95 1.00 s, the last answer after 1.00 s; the last request ended after 61.00 s; failed: 2× HTTP 503; 1× reset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, outcome(tt.in))
		})
	}
}

// Every request is in flight at once: the server answers none before it
// has them all.
func TestCallAtOnceSendsAllAtOnce(t *testing.T) {
	const n = 300
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if arrived++; arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			_, _ = w.Write([]byte("awake"))
		case <-time.After(10 * time.Second):
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	urls := make([]string, n)
	for i := range urls {
		urls[i] = srv.URL + "/"
	}
	_, answers := callAtOnce(t.Context(), urls, "awake")
	assert.Equal(t, fmt.Sprintf("%d of %d answered 200", n, n), strings.SplitN(outcome(answers), ";", 2)[0])
}

func TestUntilListening(t *testing.T) {
	var mu sync.Mutex
	tries := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if tries++; tries < 4 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	at, err := untilListening(t.Context(), srv.URL+"/healthz")
	require.NoError(t, err)
	assert.False(t, at.IsZero())
	assert.Equal(t, 4, tries)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = untilListening(ctx, "http://127.0.0.1:1/healthz")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// The watch notes each named Function's first Pod's moments; settle waits
// for Ready.
func TestWakeWatch(t *testing.T) {
	ctx := t.Context()
	c := fake.NewClientBuilder().Build()
	z := &zeroBench{podsBench: &podsBench{fnBench: &fnBench{wc: c, log: func(s string) { t.Log(s) }}, ns: "ns"}}
	ww, err := z.watchWakes(ctx, []string{"a"}, false)
	require.NoError(t, err)
	labels := func(fn string) map[string]string {
		return map[string]string{v1alpha2.LabelFunctionName: fn, v1alpha2.LabelResource: v1alpha2.ResourceDeployment}
	}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b-1", Labels: labels("b")}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-1", Labels: labels("a")}}
	require.NoError(t, c.Create(ctx, other))
	require.NoError(t, c.Create(ctx, pod))
	pod.Spec.NodeName = "node"
	require.NoError(t, c.Update(ctx, pod))
	pod.Status.PodIP = "10.0.0.7"
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	require.NoError(t, c.Status().Update(ctx, pod))
	require.NoError(t, ww.settle(ctx))
	got := ww.end()
	require.Len(t, got, 1)
	assert.Equal(t, "created, scheduled, IP, Ready", got["a"].String())
	assert.Equal(t, got, ww.end(), "ending again returns the same")
}

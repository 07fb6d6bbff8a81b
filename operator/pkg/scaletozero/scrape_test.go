package scaletozero

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

func done(replica string, calls float64) Scrape {
	return Scrape{Replica: replica, Sample: Sample{Calls: calls, Returned: calls, HasReturned: true}}
}

func TestDrained(t *testing.T) {
	tests := []struct {
		name  string
		round []Scrape
		want  bool
	}{
		{name: "all returned", round: []Scrape{done("a", 3), done("b", 0)}, want: true},
		{name: "one call running", round: []Scrape{done("a", 3), Scrape{Replica: "b", Sample: Sample{Calls: 2, Returned: 1, HasReturned: true}}}, want: false},
		{name: "a failed scrape", round: []Scrape{done("a", 3), Scrape{Replica: "b", Err: errors.New("connection refused")}}, want: false},
		{name: "a runtime that does not tell", round: []Scrape{{Replica: "a", Sample: Sample{Calls: 3}}}, want: false},
		{name: "no replica", round: nil, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Drained(tt.round))
		})
	}
}

func TestEnabled(t *testing.T) {
	tests := []struct {
		name string
		sc   *v1alpha2.ScaleConfig
		want bool
	}{
		{"no scaleConfig", nil, false},
		{"no minReplicas", &v1alpha2.ScaleConfig{MaxReplicas: ptr.To[int32](3)}, false},
		{"minReplicas 1", &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](1)}, false},
		{"minReplicas 0", &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](1)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Enabled(&v1alpha2.Function{Spec: v1alpha2.FunctionSpec{ScaleConfig: tt.sc}}))
		})
	}
}

func TestScrapeCounters(t *testing.T) {
	const metrics = "# TYPE function_calls_total counter\nfunction_calls_total{method=\"GET\"} 4\n" +
		"# TYPE function_duration_seconds histogram\nfunction_duration_seconds_count{method=\"GET\"} 3\n"
	tests := []struct {
		name     string
		handler  http.HandlerFunc
		want     Sample
		wantCode int
		wantErr  string
	}{
		{name: "the counters", handler: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/metrics" {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write([]byte(metrics))
		}, want: Sample{Calls: 4, Returned: 3, HasReturned: true}},
		{name: "another status", handler: func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "Client sent an HTTP request to an HTTPS server.", http.StatusBadRequest)
		}, wantCode: http.StatusBadRequest, wantErr: "status 400 Bad Request"},
		{name: "no call counter", handler: func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("# TYPE other counter\nother 1\n"))
		}, wantErr: "function_calls_total"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			t.Cleanup(srv.Close)
			got, err := ScrapeCounters(context.Background(), srv.Client(), strings.TrimPrefix(srv.URL, "http://"))
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			var status *StatusError
			if tt.wantCode != 0 {
				require.ErrorAs(t, err, &status)
				assert.Equal(t, tt.wantCode, status.Code)
				assert.Contains(t, string(status.Body), "HTTPS server", "the start of the answer")
			} else {
				assert.False(t, errors.As(err, &status))
			}
		})
	}

	t.Run("nothing listening", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		address := l.Addr().String()
		require.NoError(t, l.Close())
		_, err = ScrapeCounters(context.Background(), http.DefaultClient, address)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "scraping "+address)
	})
}

// A scrape with a Host dials the address and names the host (the mesh's
// route); without one the Host is the address, as before.
func TestScrapeCountersWithHost(t *testing.T) {
	var hosts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts = append(hosts, r.Host)
		_, _ = w.Write([]byte("# TYPE function_calls_total counter\nfunction_calls_total{method=\"GET\"} 2\n"))
	}))
	t.Cleanup(srv.Close)
	address := strings.TrimPrefix(srv.URL, "http://")
	got, err := ScrapeCountersWithHost(context.Background(), srv.Client(), address, "hello-private.default")
	require.NoError(t, err)
	assert.Equal(t, Sample{Calls: 2}, got)
	_, err = ScrapeCounters(context.Background(), srv.Client(), address)
	require.NoError(t, err)
	assert.Equal(t, []string{"hello-private.default", address}, hosts)
}

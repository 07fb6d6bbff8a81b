package activator

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHTTPProbe(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		wantErr string
	}{
		{name: "200 on /healthz answers", handler: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" || r.Method != http.MethodGet {
				http.NotFound(w, r)
			}
		}},
		{name: "another status does not", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		}, wantErr: "status 500"},
		{name: "a redirect is not followed", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, wantErr: "status 302"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			t.Cleanup(srv.Close)
			base, err := url.Parse(srv.URL)
			require.NoError(t, err)
			err = HTTPProbe(probeClient())(context.Background(), Replica{URL: base})
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}

	t.Run("nothing listening does not answer", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		base, err := url.Parse(srv.URL)
		require.NoError(t, err)
		srv.Close()
		assert.Error(t, HTTPProbe(probeClient())(context.Background(), Replica{URL: base}))
	})

	// Mesh mode: the probe dials the replica and names its private
	// Service, by which the activator's sidecar reaches it; without an
	// Authority the Host is the address, as before.
	t.Run("the replica's Authority is the Host", func(t *testing.T) {
		hosts := make(chan string, 2)
		srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { hosts <- r.Host }))
		t.Cleanup(srv.Close)
		base, err := url.Parse(srv.URL)
		require.NoError(t, err)
		require.NoError(t, HTTPProbe(probeClient())(context.Background(), Replica{URL: base, Authority: "hello-private.default"}))
		assert.Equal(t, "hello-private.default", <-hosts)
		require.NoError(t, HTTPProbe(probeClient())(context.Background(), Replica{URL: base}))
		assert.Equal(t, base.Host, <-hosts)
	})
}

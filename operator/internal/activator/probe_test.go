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
			err = HTTPProbe(probeClient())(context.Background(), base)
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
		assert.Error(t, HTTPProbe(probeClient())(context.Background(), base))
	})
}

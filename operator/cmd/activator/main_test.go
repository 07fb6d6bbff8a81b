package main

import (
	"bytes"
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    config
		wantErr string
	}{
		{name: "the chart's environment", env: map[string]string{EnvNamespace: "kyma-system", EnvHoldTimeout: "90s", EnvPodIP: "10.22.0.7"},
			want: config{namespace: "kyma-system", address: "10.22.0.7", holdTimeout: 90 * time.Second, metricsAddr: ":8080", probeAddr: ":8081",
				leaderElection: true, logLevel: "info", logFormat: "json"}},
		{name: "defaults: a minute's hold", env: map[string]string{EnvNamespace: "ns"},
			want: config{namespace: "ns", holdTimeout: time.Minute, metricsAddr: ":8080", probeAddr: ":8081",
				leaderElection: true, logLevel: "info", logFormat: "json"}},
		{name: "flags win over the environment", args: []string{"--hold-timeout=2m", "--namespace=other"},
			env: map[string]string{EnvNamespace: "ns", EnvHoldTimeout: "90s"},
			want: config{namespace: "other", holdTimeout: 2 * time.Minute, metricsAddr: ":8080", probeAddr: ":8081",
				leaderElection: true, logLevel: "info", logFormat: "json"}},
		{name: "no leader election needs no namespace", args: []string{"--leader-elect=false"},
			want: config{holdTimeout: time.Minute, metricsAddr: ":8080", probeAddr: ":8081", logLevel: "info", logFormat: "json"}},
		{name: "a hold timeout that is no duration", env: map[string]string{EnvNamespace: "ns", EnvHoldTimeout: "a minute"},
			wantErr: `ACTIVATOR_HOLD_TIMEOUT: "a minute" is not a duration`},
		{name: "a hold timeout below a second", args: []string{"--hold-timeout=10ms"}, env: map[string]string{EnvNamespace: "ns"},
			wantErr: "shorter than 1s"},
		{name: "no namespace for the Lease", wantErr: "set POD_NAMESPACE"},
		{name: "a stray argument", args: []string{"serve"}, env: map[string]string{EnvNamespace: "ns"},
			wantErr: `unexpected argument "serve"`},
		{name: "mesh mode from the chart", env: map[string]string{EnvNamespace: "ns", EnvMesh: "istio"},
			want: config{namespace: "ns", holdTimeout: time.Minute, metricsAddr: ":8080", probeAddr: ":8081",
				leaderElection: true, logLevel: "info", logFormat: "json", mesh: "istio"}},
		{name: "mesh mode off by the flag", args: []string{"--mesh="}, env: map[string]string{EnvNamespace: "ns", EnvMesh: "istio"},
			want: config{namespace: "ns", holdTimeout: time.Minute, metricsAddr: ":8080", probeAddr: ":8081",
				leaderElection: true, logLevel: "info", logFormat: "json"}},
		{name: "a mesh it does not know", env: map[string]string{EnvNamespace: "ns", EnvMesh: "linkerd"},
			wantErr: `the mesh "linkerd" is none the activator knows`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			got, err := parse(tc.args, lookup, &bytes.Buffer{})
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestHelpNamesTheEnvironment(t *testing.T) {
	var out bytes.Buffer
	_, err := parse([]string{"--help"}, func(string) (string, bool) { return "", false }, &out)
	require.ErrorIs(t, err, flag.ErrHelp)
	assert.Contains(t, out.String(), EnvHoldTimeout)
	assert.Contains(t, out.String(), EnvNamespace)
	assert.Contains(t, out.String(), EnvPodIP)
	assert.Contains(t, out.String(), EnvMesh)
}

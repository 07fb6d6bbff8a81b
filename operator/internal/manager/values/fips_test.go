package values

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// The manager's KYMA_FIPS_MODE_ENABLED becomes release 1.13's chart value
// containers.manager.fipsModeEnabled, whatever the CR says; the CR has no
// switch of its own (as 1.13's).
func TestBuildFIPSMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec v1alpha1.ServerlessSpec
		fips bool
	}{
		{name: "off by default", spec: v1alpha1.ServerlessSpec{}},
		{name: "on", spec: v1alpha1.ServerlessSpec{}, fips: true},
		{name: "on with the internal registry", spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}}, fips: true},
		{name: "on in buildless mode", spec: v1alpha1.ServerlessSpec{FunctionMode: v1alpha1.FunctionModeBuildless}, fips: true},
		{name: "off in buildless mode", spec: v1alpha1.ServerlessSpec{FunctionMode: v1alpha1.FunctionModeBuildless}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Build(tc.spec, Facts{Namespace: "kyma-system", Nodes: 1, NewSecret: counter(), FIPSMode: tc.fips})
			require.NoError(t, err)
			assert.Equal(t, tc.fips, res.Values.Containers.Manager.FipsModeEnabled)
			m, err := res.Values.Map()
			require.NoError(t, err)
			on, found, err := unstructured.NestedBool(m, "containers", "manager", "fipsModeEnabled")
			require.NoError(t, err)
			assert.True(t, found, "always rendered, so that switching FIPS mode off is a change too")
			assert.Equal(t, tc.fips, on)
			assert.Empty(t, res.Warnings)
		})
	}
}

// The registry's HTTP secret is derived in FIPS 140-only mode too: a
// password shorter than an HMAC key may be (112 bits) keys it with its
// SHA-256; longer ones (the manager's own: 40 characters) are the key.
func TestHTTPSecretWithAnyPassword(t *testing.T) {
	for _, tc := range []struct {
		name     string
		password string
	}{
		{name: "empty", password: ""},
		{name: "short", password: "secret"},
		{name: "13 bytes", password: "1234567890abc"},
		{name: "14 bytes", password: "1234567890abcd"},
		{name: "generated", password: strings.Repeat("x", 40)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			require.NotPanics(t, func() { got = httpSecret(tc.password) })
			assert.Len(t, got, 32)
			assert.Equal(t, got, httpSecret(tc.password), "stable")
			assert.NotEqual(t, got, httpSecret(tc.password+"!"), "follows the password")
		})
	}
}

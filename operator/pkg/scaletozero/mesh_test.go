package scaletozero

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The private Service's name is <function>-private while that is a valid
// Service name, and a valid, distinct name for every longer Function name.
func TestPrivateServiceName(t *testing.T) {
	longest := "f" + strings.Repeat("a", 62)
	fits := "f" + strings.Repeat("a", 54)
	tests := []struct {
		function string
		want     string
	}{
		{function: "hello", want: "hello-private"},
		{function: fits, want: fits + "-private"},
		{function: fits + "b", want: ""},
		{function: longest, want: ""},
		{function: "a" + strings.Repeat("-b", 31), want: ""},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got := PrivateServiceName(tt.function)
		if tt.want != "" {
			assert.Equal(t, tt.want, got)
		}
		assert.Empty(t, validation.IsDNS1035Label(got), "%q is a Service name", got)
		assert.True(t, strings.HasSuffix(got, PrivateServiceSuffix), got)
		assert.Equal(t, got, PrivateServiceName(tt.function), "stable")
		if other, ok := seen[got]; ok {
			t.Errorf("%q and %q share the name %q", other, tt.function, got)
		}
		seen[got] = tt.function
	}
	assert.Equal(t, "hello-private.default", MeshAuthority("default", "hello"))
}

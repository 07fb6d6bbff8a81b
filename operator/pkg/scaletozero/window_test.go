package scaletozero

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

func TestIdleWindow(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        time.Duration
		wantErr     []string
	}{
		{name: "no annotations", annotations: nil, want: 5 * time.Minute},
		{name: "other annotations only", annotations: map[string]string{"a": "b"}, want: 5 * time.Minute},
		{name: "seconds", annotations: idle("90s"), want: 90 * time.Second},
		{name: "hours and minutes", annotations: idle("1h30m"), want: 90 * time.Minute},
		{name: "exactly the minimum", annotations: idle("10s"), want: 10 * time.Second},
		{name: "surrounding spaces", annotations: idle(" 2m "), want: 2 * time.Minute},
		{name: "below the minimum", annotations: idle("9s"), wantErr: []string{`"9s" is shorter than the minimum of 10s`}},
		{name: "zero", annotations: idle("0s"), wantErr: []string{"shorter than the minimum"}},
		{name: "negative", annotations: idle("-5m"), wantErr: []string{"shorter than the minimum"}},
		{name: "a bare number", annotations: idle("300"), wantErr: []string{`"300" is not a duration`, "missing unit"}},
		{name: "not a duration", annotations: idle("five minutes"), wantErr: []string{`"five minutes" is not a duration`}},
		{name: "empty", annotations: idle(""), wantErr: []string{"is empty", "default of 5m0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IdleWindow(tt.annotations)
			if tt.wantErr != nil {
				require.Error(t, err)
				assert.Contains(t, err.Error(), v1alpha2.AnnotationScaleToZeroAfter)
				for _, part := range tt.wantErr {
					assert.Contains(t, err.Error(), part)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func idle(v string) map[string]string {
	return map[string]string{v1alpha2.AnnotationScaleToZeroAfter: v}
}

func TestFunctionTimeout(t *testing.T) {
	tests := []struct {
		name string
		env  []corev1.EnvVar
		want time.Duration
	}{
		{"unset", nil, 180 * time.Second},
		{"set", []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "FUNC_TIMEOUT", Value: " 45 "}}, 45 * time.Second},
		{"not a number", []corev1.EnvVar{{Name: "FUNC_TIMEOUT", Value: "soon"}}, 180 * time.Second},
		{"zero", []corev1.EnvVar{{Name: "FUNC_TIMEOUT", Value: "0"}}, 180 * time.Second},
		{"from a Secret", []corev1.EnvVar{{Name: "FUNC_TIMEOUT", ValueFrom: &corev1.EnvVarSource{}}}, 180 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := &v1alpha2.Function{Spec: v1alpha2.FunctionSpec{Env: tt.env}}
			assert.Equal(t, tt.want, FunctionTimeout(fn))
		})
	}
}

func TestHoldTimeout(t *testing.T) {
	const def = time.Minute
	tests := []struct {
		name       string
		annotation *string
		timeout    string // FUNC_TIMEOUT
		want       time.Duration
		wantErr    string
	}{
		{name: "none: the activator's", want: def},
		{name: "set", annotation: ptr.To("3m"), want: 3 * time.Minute},
		{name: "up to the Function's own timeout", annotation: ptr.To("300s"), timeout: "300", want: 5 * time.Minute},
		{name: "longer than the Function's timeout", annotation: ptr.To("5m"), want: def,
			wantErr: `annotation serverless.kyma-project.io/wake-timeout: "5m" is longer than the Function's timeout of 3m0s (FUNC_TIMEOUT)`},
		{name: "not a duration", annotation: ptr.To("soon"), want: def, wantErr: `"soon" is not a duration such as 90s or 3m`},
		{name: "zero", annotation: ptr.To("0s"), want: def, wantErr: `"0s" is not positive`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := &v1alpha2.Function{}
			if tt.annotation != nil {
				fn.Annotations = map[string]string{v1alpha2.AnnotationWakeTimeout: *tt.annotation}
			}
			if tt.timeout != "" {
				fn.Spec.Env = []corev1.EnvVar{{Name: "FUNC_TIMEOUT", Value: tt.timeout}}
			}
			got, err := HoldTimeout(fn, def)
			assert.Equal(t, tt.want, got)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

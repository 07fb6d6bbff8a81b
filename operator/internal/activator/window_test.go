package activator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

func TestScrapeInterval(t *testing.T) {
	tests := []struct {
		window, want time.Duration
	}{
		{window: 10 * time.Second, want: 2 * time.Second},
		{window: 5 * time.Second, want: 2 * time.Second},
		{window: 60 * time.Second, want: 12 * time.Second},
		{window: 5 * time.Minute, want: 30 * time.Second},
		{window: time.Hour, want: 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.window.String(), func(t *testing.T) {
			assert.Equal(t, tt.want, ScrapeInterval(tt.window))
		})
	}
}

package activator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

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

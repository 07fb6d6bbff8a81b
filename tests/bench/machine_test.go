package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, stat string
		want       time.Duration
		wantErr    bool
	}{
		{"own and reaped children's time", "4242 (containerd) S 1 4242 4242 0 -1 4194560 9 0 0 0 150 50 7 3 20 0 12 0 100 0 0", 2100 * time.Millisecond, false},
		{"a command with spaces and parentheses", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 5", 100 * time.Millisecond, false},
		{"no command", "7 a R 1", 0, true},
		{"too few fields", "7 (a) R 1 7 7 0 -1 0 0 0 0 0 1 2", 0, true},
		{"not a number", "7 (a) R 1 7 7 0 -1 0 0 0 0 0 1 x 3 4 20", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat(tt.stat)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCPUSpentCountsNewProcessesWhole(t *testing.T) {
	before := cpuSnapshot{processes: map[string]map[int]time.Duration{"kubelet": {10: time.Second}, cpuShims: {20: time.Second}}}
	after := cpuSnapshot{processes: map[string]map[int]time.Duration{"kubelet": {10: 3 * time.Second}, cpuShims: {20: 2 * time.Second, 21: 500 * time.Millisecond}}}
	got := after.since(before).processes
	assert.Equal(t, map[string]time.Duration{"kubelet": 2 * time.Second, cpuShims: 1500 * time.Millisecond}, got)
}

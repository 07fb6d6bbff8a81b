package logging

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
)

func TestNew(t *testing.T) {
	tests := []struct {
		level, format string
		wantErr       bool
	}{
		{"info", "json", false},
		{"debug", "console", false},
		{"loud", "json", true},
		{"info", "xml", true},
	}
	for _, tt := range tests {
		_, lvl, err := New(tt.level, tt.format)
		if tt.wantErr {
			assert.Error(t, err, tt)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tt.level, lvl.Level().String())
	}
}

func TestWatchChangesLevelAtRunTime(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log-config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("logLevel: warn\n"), 0o600))
	_, lvl, err := New("info", "json")
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, Watch(ctx, path, lvl, logr.Discard()))
	assert.Equal(t, zapcore.WarnLevel, lvl.Level(), "the file applies at start")

	require.NoError(t, os.WriteFile(path, []byte("logLevel: debug\n"), 0o600))
	assert.Eventually(t, func() bool { return lvl.Level() == zapcore.DebugLevel }, 5*time.Second, 20*time.Millisecond)

	// A bad file keeps the last good level.
	require.NoError(t, os.WriteFile(path, []byte("logLevel: shouting\n"), 0o600))
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, zapcore.DebugLevel, lvl.Level())
	assert.Error(t, ApplyFile(path, lvl))
}

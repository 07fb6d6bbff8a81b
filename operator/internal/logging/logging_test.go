package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// What each format writes: one JSON object a line, or console lines of
// tab-separated time, level, message and the key-value pairs as JSON.
func TestFormatsWriteTheirShape(t *testing.T) {
	tests := []struct {
		format string
		check  func(t *testing.T, line string)
	}{
		{"json", func(t *testing.T, line string) {
			var entry map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &entry), "a JSON object: %s", line)
			assert.Equal(t, "error", entry["level"])
			assert.Equal(t, "build failed", entry["msg"])
			assert.Equal(t, "hello", entry["function"])
		}},
		{"console", func(t *testing.T, line string) {
			assert.False(t, json.Valid([]byte(line)), "not JSON: %s", line)
			fields := strings.Split(line, "\t")
			require.GreaterOrEqual(t, len(fields), 4, "time, level, message, pairs: %q", line)
			_, err := time.Parse(time.RFC3339, fields[0])
			assert.NoError(t, err, "RFC 3339 time first: %q", line)
			assert.Equal(t, "ERROR", fields[1])
			assert.Equal(t, "build failed", fields[len(fields)-2])
			assert.JSONEq(t, `{"function": "hello", "error": "no space left"}`, fields[len(fields)-1])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			var out bytes.Buffer
			log, _, err := NewTo(&out, "info", tt.format)
			require.NoError(t, err)
			log.Error(errors.New("no space left"), "build failed", "function", "hello")
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			require.Len(t, lines, 1, "one line, no stack trace below it: %q", out.String())
			tt.check(t, lines[0])
		})
	}
}

// The level filters in both formats, and a malformed call (an odd number
// of key-value arguments, which logr reports at zap's DPanic level) is
// logged, never a crash of the process.
func TestLevelsAndMalformedCalls(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			var out bytes.Buffer
			log, _, err := NewTo(&out, "error", format)
			require.NoError(t, err)
			log.Info("started")
			log.V(1).Info("details")
			assert.Empty(t, out.String(), "below error nothing is written")
			log.Error(errors.New("boom"), "failed")
			assert.Contains(t, out.String(), "failed")

			out.Reset()
			assert.NotPanics(t, func() { log.Error(errors.New("boom"), "odd pairs", "key") })
			assert.Contains(t, out.String(), "odd number of arguments")
		})
	}
}

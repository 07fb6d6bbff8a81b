package config_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/logging"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log-config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestReadLogConfig(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    config.LogConfig
		wantErr string
	}{
		{"chart default", "logLevel: info\nlogFormat: json\n", config.LogConfig{Level: "info", Format: "json"}, ""},
		{"debug text", "logLevel: debug\nlogFormat: text\n", config.LogConfig{Level: "debug", Format: "text"}, ""},
		{"warn", "logLevel: warn\nlogFormat: json\n", config.LogConfig{Level: "warn", Format: "json"}, ""},
		{"error", "logLevel: error\nlogFormat: text\n", config.LogConfig{Level: "error", Format: "text"}, ""},
		{"fatal", "logLevel: fatal\nlogFormat: json\n", config.LogConfig{Level: "fatal", Format: "json"}, ""},
		{"quoted, other keys ignored", "logLevel: \"info\"\nlogFormat: 'json'\nother: 1\n", config.LogConfig{Level: "info", Format: "json"}, ""},
		{"empty file", "", config.LogConfig{}, `logLevel ""`},
		{"level missing", "logFormat: json\n", config.LogConfig{}, `logLevel ""`},
		{"level upper case", "logLevel: INFO\nlogFormat: json\n", config.LogConfig{}, `logLevel "INFO"`},
		{"level unknown", "logLevel: trace\nlogFormat: json\n", config.LogConfig{}, `logLevel "trace"`},
		{"zap-only level", "logLevel: dpanic\nlogFormat: json\n", config.LogConfig{}, `logLevel "dpanic"`},
		{"format missing", "logLevel: info\n", config.LogConfig{}, `logFormat ""`},
		{"format console", "logLevel: info\nlogFormat: console\n", config.LogConfig{}, `logFormat "console"`},
		{"not YAML", "logLevel: [info\n", config.LogConfig{}, "parsing the log configuration"},
		{"not an object", "- info\n", config.LogConfig{}, "parsing the log configuration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.content)
			got, err := config.ReadLogConfig(path)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestReadLogConfigMissingFile(t *testing.T) {
	_, err := config.ReadLogConfig(filepath.Join(t.TempDir(), "absent.yaml"))
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// Every accepted level and format builds the shared logger ("text" is zap's
// console encoder; zap has a fatal level, so nothing needs mapping there).
func TestLogConfigBuildsLogger(t *testing.T) {
	for _, level := range config.LogLevels() {
		for _, format := range config.LogFormats() {
			c, err := config.ReadLogConfig(writeFile(t, "logLevel: "+level+"\nlogFormat: "+format+"\n"))
			require.NoError(t, err)
			_, atomic, err := logging.New(c.Level, c.ZapFormat())
			require.NoError(t, err, "%s/%s", level, format)
			assert.Equal(t, level, atomic.Level().String())
		}
	}
	assert.Equal(t, "console", config.LogConfig{Format: "text"}.ZapFormat())
	assert.Equal(t, "json", config.LogConfig{Format: "json"}.ZapFormat())
}

// The Serverless CR's settings of release 1.13, as the manager maps them
// into this file, make the controller log as the mapping says: console is
// human-readable lines (time, level, message, details, tab-separated), json
// one object a line, and dpanic/panic log errors but no info.
func TestMappedSettingsLogAsDocumented(t *testing.T) {
	tests := []struct {
		level, format       string
		wantInfo, wantError bool
		wantConsole         bool
	}{
		{"", "", true, true, false},
		{"info", "console", true, true, true},
		{"debug", "text", true, true, true},
		{"dpanic", "console", false, true, true},
		{"panic", "json", false, true, false},
		{"fatal", "console", false, false, true},
		{"verbose", "console", true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.level+"/"+tt.format, func(t *testing.T) {
			built, err := values.Build(v1alpha1.ServerlessSpec{LogLevel: tt.level, LogFormat: tt.format},
				values.Facts{Namespace: "kyma-system", NewSecret: func(n int) string { return strings.Repeat("s", n) }})
			require.NoError(t, err)
			// The chart writes the two values into the file as they are.
			file := "logLevel: " + built.Values.Controller.LogLevel + "\nlogFormat: " + built.Values.Controller.LogFormat + "\n"
			c, err := config.ReadLogConfig(writeFile(t, file))
			require.NoError(t, err, "the controller starts with %q", file)

			var out bytes.Buffer
			log, _, err := logging.NewTo(&out, c.Level, c.ZapFormat())
			require.NoError(t, err)
			log.Info("function reconciled", "function", "hello")
			log.Error(errors.New("no space left"), "build failed", "function", "hello")
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			var want []string
			if tt.wantInfo {
				want = append(want, "function reconciled")
			}
			if tt.wantError {
				want = append(want, "build failed")
			}
			if want == nil {
				assert.Empty(t, out.String())
				return
			}
			require.Len(t, lines, len(want), out.String())
			for i, line := range lines {
				if tt.wantConsole {
					fields := strings.Split(line, "\t")
					require.Len(t, fields, 4, "time, level, message, details: %q", line)
					assert.Equal(t, want[i], fields[2])
					assert.True(t, json.Valid([]byte(fields[3])), "details as JSON: %q", fields[3])
					assert.False(t, json.Valid([]byte(line)))
				} else {
					var entry map[string]any
					require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
					assert.Equal(t, want[i], entry["msg"])
				}
			}
		})
	}
}

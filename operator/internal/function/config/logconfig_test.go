package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/logging"
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

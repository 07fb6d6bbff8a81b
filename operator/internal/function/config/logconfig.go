package config

import (
	"fmt"
	"os"
	"slices"

	"sigs.k8s.io/yaml"
)

// LogLevels the log configuration file may name (1.8.4's,
// docs/contributor/upstream-contract.md#log-configuration).
func LogLevels() []string { return []string{"debug", "info", "warn", "error", "fatal"} }

// LogFormats the log configuration file may name.
func LogFormats() []string { return []string{LogFormatJSON, LogFormatText} }

// Log formats of the file; "text" is zap's console encoder.
const (
	LogFormatJSON = "json"
	LogFormatText = "text"
)

// LogConfig is the log configuration file (APP_LOG_CONFIG_PATH).
type LogConfig struct {
	Level  string `json:"logLevel"`  // debug|info|warn|error|fatal; zap parses every one of them
	Format string `json:"logFormat"` // json|text
}

// ZapFormat is the format as operator/internal/logging.New names it.
func (c LogConfig) ZapFormat() string {
	if c.Format == LogFormatText {
		return "console"
	}
	return c.Format
}

// ReadLogConfig reads and checks the file. A missing or unreadable file,
// bad YAML, or a level or format outside the lists (lower case, not empty)
// is an error: the controller does not start on a configuration it cannot
// honour. Other keys are ignored (the ConfigMap may carry more).
func ReadLogConfig(path string) (LogConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return LogConfig{}, fmt.Errorf("reading the log configuration: %w", err)
	}
	var c LogConfig
	if err := yaml.Unmarshal(data, &c); err != nil {
		return LogConfig{}, fmt.Errorf("parsing the log configuration %s: %w", path, err)
	}
	if !slices.Contains(LogLevels(), c.Level) {
		return LogConfig{}, fmt.Errorf("log configuration %s: logLevel %q: want one of %v", path, c.Level, LogLevels())
	}
	if !slices.Contains(LogFormats(), c.Format) {
		return LogConfig{}, fmt.Errorf("log configuration %s: logFormat %q: want one of %v", path, c.Format, LogFormats())
	}
	return c, nil
}

package values

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// Every log level and format of releases 1.8.4 and 1.13 maps onto the
// Function controller's file; anything else gets the default and a warning
// that names it; the status shows what is in effect.
func TestLogSettings(t *testing.T) {
	unknownLevel := func(v string) []Notice {
		return []Notice{{v1alpha1.ReasonLogSettingUnknown, UnknownLogLevelMessage(v)}}
	}
	tests := []struct {
		name          string
		level, format string
		wantLevel     string
		wantFormat    string
		wantWarnings  []Notice
		wantNotes     []Notice
	}{
		{name: "unset", wantLevel: "info", wantFormat: "json"},
		{name: "debug json", level: "debug", format: "json", wantLevel: "debug", wantFormat: "json"},
		{name: "info text", level: "info", format: "text", wantLevel: "info", wantFormat: "text"},
		{name: "warn", level: "warn", wantLevel: "warn", wantFormat: "json"},
		{name: "error", level: "error", wantLevel: "error", wantFormat: "json"},
		{name: "fatal is the controller's own", level: "fatal", wantLevel: "fatal", wantFormat: "json"},
		{name: "1.13's console is text", format: "console", wantLevel: "info", wantFormat: "text"},
		{name: "1.13's dpanic is logged at error", level: "dpanic", format: "console", wantLevel: "error", wantFormat: "text",
			wantNotes: []Notice{{v1alpha1.ReasonLogLevelMapped,
				`spec.logLevel "dpanic" is logged at error, the nearest level the Function controller has: error entries show as well; fatal shows fewer`}}},
		{name: "1.13's panic is logged at error", level: "panic", wantLevel: "error", wantFormat: "json",
			wantNotes: []Notice{{v1alpha1.ReasonLogLevelMapped,
				`spec.logLevel "panic" is logged at error, the nearest level the Function controller has: error entries show as well; fatal shows fewer`}}},
		{name: "unknown level", level: "verbose", wantLevel: "info", wantFormat: "json",
			wantWarnings: []Notice{{v1alpha1.ReasonLogSettingUnknown,
				`spec.logLevel "verbose" is not a log level: the Function controller logs at info, the default; use debug, info, warn, error or fatal`}}},
		{name: "upper case is not the controller's", level: "DEBUG", format: "text", wantLevel: "info", wantFormat: "text",
			wantWarnings: unknownLevel("DEBUG")},
		{name: "spaces are kept", level: " debug", wantLevel: "info", wantFormat: "json", wantWarnings: unknownLevel(" debug")},
		{name: "unknown format", level: "warn", format: "xml", wantLevel: "warn", wantFormat: "json",
			wantWarnings: []Notice{{v1alpha1.ReasonLogSettingUnknown,
				`spec.logFormat "xml" is not a log format: the Function controller logs json, the default; use json, or text (also called console)`}}},
		{name: "both unknown: two warnings", level: "loud", format: "Console", wantLevel: "info", wantFormat: "json",
			wantWarnings: []Notice{
				{v1alpha1.ReasonLogSettingUnknown, UnknownLogLevelMessage("loud")},
				{v1alpha1.ReasonLogSettingUnknown, UnknownLogFormatMessage("Console")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Build(v1alpha1.ServerlessSpec{LogLevel: tt.level, LogFormat: tt.format}, Facts{Namespace: "kyma-system", NewSecret: counter()})
			require.NoError(t, err, "a log setting never stops the install")
			assert.Equal(t, tt.wantLevel, res.Values.Controller.LogLevel)
			assert.Equal(t, tt.wantFormat, res.Values.Controller.LogFormat)
			assert.Equal(t, tt.wantLevel, res.Effective.LogLevel, "the status shows the level in effect")
			assert.Equal(t, tt.wantFormat, res.Effective.LogFormat)
			assert.Equal(t, tt.wantWarnings, res.Warnings)
			assert.Equal(t, tt.wantNotes, res.Notes)
			assert.Contains(t, controllerLogLevels(), res.Values.Controller.LogLevel, "the controller's file takes it")
			assert.Contains(t, controllerLogFormats(), res.Values.Controller.LogFormat)
		})
	}
}

// A message repeats at most 64 characters of a value: the CRD bounds no
// length, and a condition message is at most 32 KiB.
func TestLogSettingMessagesCutLongValues(t *testing.T) {
	long := strings.Repeat("é", 10000)
	msg := UnknownLogLevelMessage(long)
	assert.Contains(t, msg, `spec.logLevel "`+strings.Repeat("é", 64)+`…" is not a log level`)
	assert.Less(t, len(msg), 400)
	assert.Contains(t, UnknownLogFormatMessage(long), `spec.logFormat "`+strings.Repeat("é", 64)+`…" is not a log format`)
	assert.Contains(t, UnknownLogLevelMessage(strings.Repeat("x", 64)), `"`+strings.Repeat("x", 64)+`" is`, "64 characters are shown whole")
}

package values

import (
	"slices"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// The Function controller's log configuration file takes the levels and
// formats of release 1.8.4's controller (docs/contributor/logging.md); the
// Serverless CR takes every string, as release 1.13's CRD did, and 1.13's
// documentation names more values. logSettings maps the CR's values onto
// the file's; the admission policy config/admission/serverless-warnings.yaml
// warns with the same texts (TestAdmissionWarningsAreTheManagers).

// Log levels and formats of the Function controller's configuration file.
var (
	controllerLogLevels  = []string{"debug", "info", "warn", "error", "fatal"}
	controllerLogFormats = []string{"json", "text"}
)

// LogLevelAliases are spec.logLevel values the controller has no level for,
// with the level it logs at instead: zap orders error < dpanic < panic <
// fatal, and error is the nearest one below, so nothing the user asked to
// see goes missing (error entries show as well).
var LogLevelAliases = map[string]string{"dpanic": "error", "panic": "error"}

// LogFormatAliases are spec.logFormat values that name a controller format
// differently: release 1.13 calls zap's console encoder "console", 1.8.4
// (and the controller's file) "text"; the lines are the same.
var LogFormatAliases = map[string]string{"console": "text"}

// shownValueMax bounds how much of a spec value a message repeats: the CRD
// sets no length, and a condition message is at most 32 KiB.
const shownValueMax = 64

// shown is v as a message repeats it, cut at shownValueMax characters.
func shown(v string) string {
	if r := []rune(v); len(r) > shownValueMax {
		return string(r[:shownValueMax]) + "…"
	}
	return v
}

// UnknownLogLevelMessage is the warning about a spec.logLevel that is no level.
func UnknownLogLevelMessage(v string) string {
	return `spec.logLevel "` + shown(v) + `" is not a log level: the Function controller logs at ` + DefaultLogLevel +
		", the default; use debug, info, warn, error or fatal"
}

// UnknownLogFormatMessage is the warning about a spec.logFormat that is no format.
func UnknownLogFormatMessage(v string) string {
	return `spec.logFormat "` + shown(v) + `" is not a log format: the Function controller logs ` + DefaultLogFormat +
		", the default; use json, or text (also called console)"
}

// MappedLogLevelMessage says what a level alias means for the controller.
func MappedLogLevelMessage(v string) string {
	return `spec.logLevel "` + v + `" is logged at ` + LogLevelAliases[v] +
		", the nearest level the Function controller has: error entries show as well; fatal shows fewer"
}

// LogSettings are the controller's level and format for a spec, and what
// the status says about them.
type LogSettings struct {
	Level, Format string
	// Warnings: a value the controller cannot take, replaced by the default.
	Warnings []Notice
	// Notes: a value taken with a slightly different meaning.
	Notes []Notice
}

// logSettings maps spec.logLevel and spec.logFormat. Values are compared
// as written: the controller's file is lower case, and so are the values
// both releases document.
func logSettings(spec v1alpha1.ServerlessSpec) LogSettings {
	s := LogSettings{Level: DefaultLogLevel, Format: DefaultLogFormat}
	switch level := spec.LogLevel; {
	case level == "":
	case slices.Contains(controllerLogLevels, level):
		s.Level = level
	case LogLevelAliases[level] != "":
		s.Level = LogLevelAliases[level]
		s.Notes = append(s.Notes, Notice{Cause: v1alpha1.ReasonLogLevelMapped, Message: MappedLogLevelMessage(level)})
	default:
		s.Warnings = append(s.Warnings, Notice{Cause: v1alpha1.ReasonLogSettingUnknown, Message: UnknownLogLevelMessage(level)})
	}
	switch format := spec.LogFormat; {
	case format == "":
	case slices.Contains(controllerLogFormats, format):
		s.Format = format
	case LogFormatAliases[format] != "":
		s.Format = LogFormatAliases[format]
	default:
		s.Warnings = append(s.Warnings, Notice{Cause: v1alpha1.ReasonLogSettingUnknown, Message: UnknownLogFormatMessage(format)})
	}
	return s
}

// Notice is a part of the Configured condition's message with its cause.
type Notice struct {
	Cause   string
	Message string
}

// String is the notice as a list of them shows it: "<Cause>: <message>".
func (n Notice) String() string { return n.Cause + ": " + n.Message }

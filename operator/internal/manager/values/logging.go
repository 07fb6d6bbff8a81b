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

// controllerLogLevels and controllerLogFormats are what the Function
// controller's configuration file takes.
func controllerLogLevels() []string  { return []string{"debug", "info", "warn", "error", "fatal"} }
func controllerLogFormats() []string { return []string{"json", "text"} }

// mappedLevel is the level of the level aliases: zap orders error < dpanic
// < panic < fatal, and error is the nearest one below, so nothing the user
// asked to see goes missing (error entries show as well).
const mappedLevel = "error"

// levelAlias is the level the controller logs at for a spec.logLevel it has
// no level for; "" when v is none of them.
func levelAlias(v string) string {
	if v == "dpanic" || v == "panic" {
		return mappedLevel
	}
	return ""
}

// formatAlias is the controller's name of a spec.logFormat named
// differently: release 1.13 calls zap's console encoder "console", 1.8.4
// (and the controller's file) "text"; the lines are the same.
func formatAlias(v string) string {
	if v == "console" {
		return "text"
	}
	return ""
}

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

// The messages spell their fixed parts in one expression each, so that the
// documentation's checks find them (tests/docs).

// UnknownLogLevelMessage is the warning about a spec.logLevel that is no level.
func UnknownLogLevelMessage(v string) string {
	return `spec.logLevel "` + shown(v) + (`" is not a log level: the Function controller logs at ` + DefaultLogLevel +
		", the default; use debug, info, warn, error or fatal")
}

// UnknownLogFormatMessage is the warning about a spec.logFormat that is no format.
func UnknownLogFormatMessage(v string) string {
	return `spec.logFormat "` + shown(v) + (`" is not a log format: the Function controller logs ` + DefaultLogFormat +
		", the default; use json, or text (also called console)")
}

// MappedLogLevelMessage says what a level alias means for the controller.
func MappedLogLevelMessage(v string) string {
	return `spec.logLevel "` + v + (`" is logged at ` + mappedLevel +
		", the nearest level the Function controller has: error entries show as well; fatal shows fewer")
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
	case slices.Contains(controllerLogLevels(), level):
		s.Level = level
	case levelAlias(level) != "":
		s.Level = levelAlias(level)
		s.Notes = append(s.Notes, Notice{Cause: v1alpha1.ReasonLogLevelMapped, Message: MappedLogLevelMessage(level)})
	default:
		s.Warnings = append(s.Warnings, Notice{Cause: v1alpha1.ReasonLogSettingUnknown, Message: UnknownLogLevelMessage(level)})
	}
	switch format := spec.LogFormat; {
	case format == "":
	case slices.Contains(controllerLogFormats(), format):
		s.Format = format
	case formatAlias(format) != "":
		s.Format = formatAlias(format)
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

package scaletozero

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

const (
	// DefaultHoldTimeout is how long the activator holds a request for a
	// replica unless told otherwise: longer than a buildless cold start
	// with its dependency install, shorter than common client and gateway
	// timeouts.
	DefaultHoldTimeout = time.Minute
	// DefaultIdleWindow applies when a Function does not set
	// v1alpha2.AnnotationScaleToZeroAfter.
	DefaultIdleWindow = 5 * time.Minute
	// MinIdleWindow is the shortest idle window accepted: shorter ones
	// would scale a Function down between two requests of a slow client
	// and cost a cold start each time.
	MinIdleWindow = 10 * time.Second
)

// IdleWindow reads how long a Function may go without a request before it
// is scaled to zero. A value that does not parse or is below MinIdleWindow
// is an error, never silently replaced: the caller keeps the Function
// running and reports the error.
func IdleWindow(annotations map[string]string) (time.Duration, error) {
	raw, ok := annotations[v1alpha2.AnnotationScaleToZeroAfter]
	if !ok {
		return DefaultIdleWindow, nil
	}
	value := strings.TrimSpace(raw)
	if value == "" {
		return 0, fmt.Errorf("annotation %s is empty: give a duration such as 90s or 5m, or remove it for the default of %s",
			v1alpha2.AnnotationScaleToZeroAfter, DefaultIdleWindow)
	}
	d, err := time.ParseDuration(value)
	if err != nil {
		return 0, fmt.Errorf("annotation %s: %q is not a duration such as 90s, 5m or 1h30m: %w",
			v1alpha2.AnnotationScaleToZeroAfter, raw, err)
	}
	if d < MinIdleWindow {
		return 0, fmt.Errorf("annotation %s: %q is shorter than the minimum of %s",
			v1alpha2.AnnotationScaleToZeroAfter, raw, MinIdleWindow)
	}
	return d, nil
}

// DefaultFunctionTimeout is the runtimes' own timeout of a call when the
// Function sets no FUNC_TIMEOUT (docs/contributor/runtime-contract.md).
const DefaultFunctionTimeout = 180 * time.Second

// FunctionTimeout is the Function's FUNC_TIMEOUT (seconds), or
// DefaultFunctionTimeout when it is unset or not a positive number: how
// long a call may run before the runtime answers it itself.
func FunctionTimeout(fn *v1alpha2.Function) time.Duration {
	for _, e := range fn.Spec.Env {
		if e.Name != "FUNC_TIMEOUT" || e.ValueFrom != nil {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(e.Value)); err == nil && n > 0 {
			return time.Duration(n) * time.Second
		}
	}
	return DefaultFunctionTimeout
}

// HoldTimeout reads how long a request to fn is held while it wakes: the
// annotation v1alpha2.AnnotationWakeTimeout, or def without it. A value
// that does not parse, is not positive, or is longer than the Function's
// own timeout (a caller waiting longer would get the runtime's timeout
// anyway) is an error; the caller holds for def and reports it.
func HoldTimeout(fn *v1alpha2.Function, def time.Duration) (time.Duration, error) {
	raw, ok := fn.Annotations[v1alpha2.AnnotationWakeTimeout]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(raw))
	if err != nil {
		return def, fmt.Errorf("annotation %s: %q is not a duration such as 90s or 3m: %w", v1alpha2.AnnotationWakeTimeout, raw, err)
	}
	if d <= 0 {
		return def, fmt.Errorf("annotation %s: %q is not positive", v1alpha2.AnnotationWakeTimeout, raw)
	}
	if limit := FunctionTimeout(fn); d > limit {
		return def, fmt.Errorf("annotation %s: %q is longer than the Function's timeout of %s (FUNC_TIMEOUT)",
			v1alpha2.AnnotationWakeTimeout, raw, limit)
	}
	return d, nil
}
